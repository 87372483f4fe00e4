"""A seccomp filter that forbids new user namespaces, for bwrap's ``--seccomp FD`` (root only).

As root the sandbox drops each command to the workspace's own uid with ``setpriv``. A dropped
process could still make an unprivileged user namespace and, inside it, mount and regain
capabilities over its own view. Forbidding that used to take a second, unprivileged bwrap inside
(``--unshare-user --disable-userns``): one more exec and one more namespace set-up per command
(about 1.9 ms of machine CPU of ~10 ms, ``benchmarks/perf/sandbox_launch_cost.py``). This filter
does the same in the kernel's syscall path, loaded by the outer bwrap just before it runs the
command, and inherited by everything the command starts:

- ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` in their flags fail with ``EPERM``;
- ``clone3`` (whose flags sit behind a pointer the filter cannot read) fails with ``ENOSYS``, so the
  C library falls back to ``clone``, which the filter can check;
- ``setns`` fails with ``EPERM`` (joining another process's namespaces);
- a syscall of another ABI (i386 ``int 0x80``, x32) fails with ``EPERM``: the checks above are
  written in the native ABI's syscall numbers only.

Written as classic BPF by hand (the program is a dozen instructions; libseccomp is not a Python
dependency here). Machines other than x86_64 and aarch64 get ``None`` and keep the inner bwrap.
"""

from __future__ import annotations

import functools
import os
import platform
import struct
from dataclasses import dataclass

CLONE_NEWUSER = 0x10000000
EPERM = 1
ENOSYS = 38

# classic BPF opcodes (linux/bpf_common.h)
_LD_W_ABS = 0x00 | 0x00 | 0x20
_JEQ_K = 0x05 | 0x10 | 0x00
_JGE_K = 0x05 | 0x30 | 0x00
_JSET_K = 0x05 | 0x40 | 0x00
_RET_K = 0x06 | 0x00

# linux/seccomp.h
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR = 0
_ARCH = 4
_ARG0_LOW = 16  # little-endian: the low 32 bits of args[0] (every flag the filter reads is there)

X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class Abi:
    """What the filter needs of one machine: its audit arch and four syscall numbers."""

    audit_arch: int
    clone: int
    unshare: int
    setns: int
    clone3: int
    x32_bit: bool = False
    """x86_64 also accepts x32 syscalls (the number with bit 30 set), under the same audit arch."""


ABIS = {
    "x86_64": Abi(0xC000003E, clone=56, unshare=272, setns=308, clone3=435, x32_bit=True),
    "aarch64": Abi(0xC00000B7, clone=220, unshare=97, setns=268, clone3=435),
}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(abi: Abi) -> bytes:
    """The compiled filter for ``abi`` (``struct sock_filter`` array, as bwrap reads it)."""
    deny = _RET_ERRNO | EPERM
    head = [
        _ins(_LD_W_ABS, _ARCH),
        _ins(_JEQ_K, abi.audit_arch, jt=1, jf=0),
        _ins(_RET_K, deny),  # another ABI: its syscall numbers mean other things
        _ins(_LD_W_ABS, _NR),
    ]
    if abi.x32_bit:
        head += [_ins(_JGE_K, X32_SYSCALL_BIT, jt=0, jf=1), _ins(_RET_K, deny)]
    # the checks, each jumping forward to its verdict below the ALLOW
    body = [
        _ins(_JEQ_K, abi.clone, jt=6, jf=0),  # -> flags check
        _ins(_JEQ_K, abi.unshare, jt=5, jf=0),  # -> flags check
        _ins(_JEQ_K, abi.clone3, jt=1, jf=0),  # -> ENOSYS
        _ins(_JEQ_K, abi.setns, jt=1, jf=2),  # -> EPERM, else ALLOW
        _ins(_RET_K, _RET_ERRNO | ENOSYS),
        _ins(_RET_K, deny),
        _ins(_RET_K, _RET_ALLOW),
        # flags check (clone, unshare): CLONE_NEWUSER set -> EPERM
        _ins(_LD_W_ABS, _ARG0_LOW),
        _ins(_JSET_K, CLONE_NEWUSER, jt=0, jf=1),
        _ins(_RET_K, deny),
        _ins(_RET_K, _RET_ALLOW),
    ]
    return b"".join(head + body)


_disabled = False


def disable() -> None:
    """This kernel refused the filter (``probe_bwrap`` found out): launches go without it."""
    global _disabled
    _disabled = True


@functools.cache
def _native() -> bytes | None:
    abi = ABIS.get(platform.machine())
    return program(abi) if abi is not None else None


def native_program() -> bytes | None:
    """The filter for this machine, or None where it is not written, where the kernel refused it
    or with ``HARNESSEVOLVE_NO_SECCOMP`` set (the inner bwrap then forbids user namespaces)."""
    if _disabled or os.environ.get("HARNESSEVOLVE_NO_SECCOMP"):
        return None
    return _native()


def filter_fd() -> int | None:
    """A new file descriptor holding the native filter at offset 0, for one bwrap (it reads the fd
    to its end, so no two launches may share one); the caller closes it once bwrap has started.
    None where there is no filter for this machine."""
    code = native_program()
    if code is None:
        return None
    fd = os.memfd_create("he-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, code)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
