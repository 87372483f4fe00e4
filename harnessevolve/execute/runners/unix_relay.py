"""A TCP -> unix-socket relay that runs *inside* the sandbox, in front of an external agent.

The sandbox has no network (its own, private loopback only); the rollout's model endpoint is a
unix socket bind-mounted into it. Agents that only know an ``http://host:port`` base URL reach it
through this relay: ``python unix_relay.py SOCKET`` listens on a free port of the sandbox's own
127.0.0.1, prints the port, and goes to the background serving every connection by piping bytes
both ways to SOCKET. It stays in the agent's process group, so it dies with the sandbox (or,
unsandboxed, when the runner kills that group). Standard library only: it is run by path, without
harnessevolve being importable there.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

CHUNK = 65536


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (sink, source):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve_one(client: socket.socket, path: str) -> None:
    # A reply arrives from the endpoint in pieces (headers, then body): without TCP_NODELAY, Nagle
    # holds each later piece back until the agent's delayed ACK of the first (tens of ms a call).
    with contextlib.suppress(OSError):
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
    _pipe(client, upstream)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: unix_relay.py SOCKET", file=sys.stderr)
        return 2
    path = argv[1]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    if os.fork():
        return 0  # the parent reports the port and exits; the child serves until the sandbox ends
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(client, path), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
