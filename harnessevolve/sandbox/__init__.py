"""Sandboxes: where everything an agent, an optimizer or a checker wrote runs.

Below the stages: ``execute/`` (agent commands, tools, external agents), ``pipeline/`` (checks),
``synth/`` (task test runs) and ``cli/`` use it; it imports only ``core``.

- ``base``: the ``Sandbox`` Protocol, the views (read-only paths), choosing a sandbox by name;
- ``bwrap`` / ``docker``: the implementations; ``launch``: the process, its limits and clean-up;
- ``limits``: per-rollout cgroup and tmpfs workspace limits; ``uids``: per-rollout uid leases.
"""
