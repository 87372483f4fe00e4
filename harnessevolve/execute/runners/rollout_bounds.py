"""How much of the host one external-agent rollout may take, in one place (docs/threat-model.md).

An external agent (``command``, ``mini-swe-agent``) leaves things for the host: files in its
output folder, requests to its model endpoint, and through both its trajectory, which the run
folder keeps. Each is bounded here, and each bound is enforced where the thing is made:

- the **output folder** (``$HARNESSEVOLVE_OUT``) is a tmpfs of its own when we are root
  (``OUT_MB`` plus the harness copy's size, ``OUT_FILES`` files), removed with the rollout; the host
  reads back only regular files, never through a link, at most ``ANSWER_BYTES`` for the answer
  and ``RECORD_FILE_BYTES`` for the agent's own trajectory (``rollout_files``);
- the **endpoint** refuses a request body over ``REQUEST_BYTES`` (recorded as its size and sha256
  only), ends the rollout after ``REFUSED_CALLS`` refused requests (``refusal_limit``) or once what
  it recorded passes ``RECORD_BYTES`` (``record_limit``), and records nothing after that;
- the **trajectory** (what the run folder stores for the rollout) is at most ``TRAJECTORY_BYTES`` as
  JSON; a larger one is replaced by a summary (its steps dropped, ``record_limit``).

The workspace has its own limits (``SandboxLimits.workspace_mb`` / ``workspace_files``), so a
rollout's whole host footprint is at most workspace + output folder + trajectory + the endpoint's
record (which is part of the trajectory).
"""

from __future__ import annotations

MIB = 1 << 20
OUT_MB = 64
"""Size of the output folder's tmpfs besides the harness copy, in MiB."""
OUT_FILES = 1000
"""Files and folders the output folder's tmpfs may hold besides the harness copy."""
ANSWER_BYTES = 100_000
"""The largest ``answer.txt`` read back; a larger one fails the rollout (``bad_output``)."""
RECORD_FILE_BYTES = 32 * MIB
"""The largest trajectory file of the agent's own (ATIF, mini-swe-agent's) read back."""
REQUEST_BYTES = 8 * MIB
"""The largest request body the endpoint accepts (a long conversation is well under 1 MiB)."""
REQUEST_HARD_BYTES = 64 * MIB
"""Past this the endpoint stops reading a refused body and drops the connection."""
REFUSED_CALLS = 32
"""Refused requests (bad JSON, wrong model, too large, past a limit) a rollout may make; the next
one ends it (``refusal_limit``)."""
RECORD_BYTES = 16 * MIB
"""What the endpoint records of one rollout's requests and replies (JSON bytes) at most."""
TRAJECTORY_BYTES = 64 * MIB
"""The largest trajectory (JSON) one external rollout hands to the run folder."""


def out_folder_mb(harness_bytes: int) -> int:
    """Size of the control folder's tmpfs (output folder, task file, harness copy), in MiB."""
    return OUT_MB + -(-harness_bytes // MIB)


def out_folder_files(harness_files: int) -> int:
    """Files and folders the control folder's tmpfs may hold (the harness copy's, a few of ours)."""
    return OUT_FILES + 2 * harness_files + 16
