"""python-agent: the harness's own loop. Run inside the sandbox by harnessevolve's command runner.

It reads the task file ($HARNESSEVOLVE_TASK: instruction, turns, system prompt, tools, loop
settings), asks the model through the rollout's OpenAI-compatible endpoint ($OPENAI_BASE_URL,
model $OPENAI_MODEL), runs the tools it calls in the workspace (its working directory) and writes
the submitted answer to $HARNESSEVOLVE_ANSWER. Every model call is recorded by harnessevolve.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from openai import APIStatusError, OpenAI

NO_TOOL_NUDGE = "You did not call a tool. Call one of the tools; call submit with your final answer."

task = json.loads(Path(os.environ["HARNESSEVOLVE_TASK"]).read_text())
loop = task["loop"]
specs = {t["name"]: t for t in task["tools"]}
tools = [
    {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
    for t in task["tools"]
]
progress = task.get("progress")  # with progress on: the notes tool, kept in $HARNESSEVOLVE_NOTES
if progress and progress.get("tool"):
    specs["notes"] = {**progress["tool"], "builtin": "notes"}
    tools.append({"type": "function", "function": progress["tool"]})
socket_path = os.environ.get("HARNESSEVOLVE_MODEL_SOCKET")  # HTTP over the endpoint's unix socket:
if socket_path:  # one hop less than $OPENAI_BASE_URL, which reaches the same socket through a relay
    transport = httpx.HTTPTransport(uds=socket_path)
    client = OpenAI(
        base_url="http://endpoint/v1",
        http_client=httpx.Client(transport=transport, timeout=600),
        max_retries=0,
    )
else:
    client = OpenAI(max_retries=0, timeout=600)


def cut(text: str) -> str:
    limit = loop["tool_output_limit"]
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def shell(command: str, env: dict | None = None) -> str:
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=loop["command_timeout_s"],
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return f"[timed out after {loop['command_timeout_s']}s]"
    out = done.stdout + done.stderr
    return out + (f"\n[exit code {done.returncode}]" if done.returncode else "")


def notes(args: dict) -> str:
    """Progress notes across steps and turns: read them, write (replace) them or append a line."""
    path = Path(os.environ["HARNESSEVOLVE_NOTES"])
    old = path.read_text() if path.exists() else ""
    action, text = args.get("action"), str(args.get("text", ""))
    if action == "read":
        return old or "(no notes yet)"
    if action not in ("write", "append"):
        return "error: notes takes action read, write or append, and text"
    new = text if action == "write" else (f"{old}\n{text}" if old else text)
    limit = progress["max_chars"]
    path.write_text(new[:limit])
    return "notes saved" + (f" (cut at {limit} characters)" if len(new) > limit else "")


def run_tool(name: str, args: dict) -> tuple[str, str | None]:
    """(output, answer): the answer is set when the tool was submit."""
    spec = specs.get(name)
    if spec is None:
        return f"error: unknown tool {name!r}; tools: {', '.join(specs)}", None
    missing = [a for a in spec["parameters"].get("required", []) if a not in args]
    if missing:
        return f"error: missing argument(s) {', '.join(missing)} for {name}", None
    if spec.get("builtin") == "submit":
        return "submitted", str(args.get("answer", ""))
    if spec.get("builtin") == "notes":
        return notes(args), None
    if spec.get("builtin") == "bash":
        return cut(shell(str(args["command"]))), None
    if spec.get("builtin") == "read_file":
        try:
            return cut(Path(str(args["path"])).read_text(errors="replace")), None
        except OSError as exc:
            return f"error: {exc}", None
    if spec.get("builtin") == "write_file":
        Path(str(args["path"])).parent.mkdir(parents=True, exist_ok=True)
        Path(str(args["path"])).write_text(str(args.get("content", "")))
        return f"wrote {len(str(args.get('content', '')).encode())} bytes to {args['path']}", None
    if spec.get("command"):
        return cut(shell(spec["command"], {f"ARG_{k}": str(v) for k, v in args.items()})), None
    return f"error: tool {name} has no implementation", None


def main() -> int:
    messages = [{"role": "system", "content": task["system_prompt"]}]
    answer = None
    note = f"\n{loop['observation_note']}" if loop.get("observation_note") else ""
    for turn in task["turns"]:
        messages.append({"role": "user", "content": turn})
        answer = None
        for _ in range(loop["max_steps"]):
            try:
                reply = client.chat.completions.create(
                    model=os.environ["OPENAI_MODEL"],
                    messages=messages,
                    tools=tools,
                    temperature=loop["temperature"],
                    max_tokens=loop["max_tokens"],
                )
            except APIStatusError as exc:  # a budget stop or a refusal: end cleanly, say why
                print(f"model endpoint refused: {exc.status_code} {exc.message}", file=sys.stderr)
                return 3
            message = reply.choices[0].message
            if not message.tool_calls:
                messages += [
                    {"role": "assistant", "content": message.content or ""},
                    {"role": "user", "content": NO_TOOL_NUDGE},
                ]
                continue
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                try:
                    args = json.loads(call.function.arguments or "{}")
                except json.JSONDecodeError:
                    args = None
                if not isinstance(args, dict):
                    output = f"error: arguments of {call.function.name} are not a JSON object"
                else:
                    output, submitted = run_tool(call.function.name, args)
                    answer = submitted if submitted is not None else answer
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output + note})
            if answer is not None:
                break
    if answer is None:
        print("no answer submitted within the step limit", file=sys.stderr)
        return 0
    Path(os.environ["HARNESSEVOLVE_ANSWER"]).write_text(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
