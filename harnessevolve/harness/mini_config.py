"""A mini-swe-agent config inside a harness (``agent.config``), checked the way mini-swe-agent reads it.

The file is mini-swe-agent's own YAML (``agent:``, ``environment:``, ``model:`` sections). Its
sections must fit mini-swe-agent's config models (``AgentConfig``, ``LocalEnvironmentConfig``,
``LitellmModelConfig``; the model name is the run's, so the file need not give one) and every
template must render with a sample task -- in Jinja's *sandboxed* environment, since an optimizer
may have written it; at run time the templates render inside the rollout's sandbox only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessError

TEMPLATES = (
    ("agent", "system_template"),
    ("agent", "instance_template"),
    ("model", "observation_template"),
    ("model", "format_error_template"),
)
SAMPLE_OUTPUT = {"output": "file.txt\n", "returncode": 0, "exception_info": ""}


def import_minisweagent() -> Any:
    """The ``minisweagent`` package, imported quietly: no banner on stdout, and its global config
    folder (``.env`` loaded into the environment at import) is a private empty one, not ``~``'s."""
    # its config models import litellm: with the offline cost map (as models/registry.py does), no network
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault(
        "MSWEA_GLOBAL_CONFIG_DIR", os.path.join(tempfile.gettempdir(), "harnessevolve-mswea")
    )
    try:
        import minisweagent
        import minisweagent.agents.default  # noqa: F401
        import minisweagent.environments.local  # noqa: F401
    except ImportError:
        raise HarnessError(
            "agent.kind is mini-swe-agent but the mini-swe-agent package is not installed",
            file="harness.yaml",
            field="agent.kind",
            hint="pip install 'harnessevolve[agents]' (or 'mini-swe-agent>=2.4,<3')",
        ) from None
    return minisweagent


def read_mini_config(rel: str, files: dict[str, str]) -> dict[str, Any]:
    """The parsed config file ``rel``; ``HarnessError`` naming it when missing or not a YAML mapping."""
    import yaml

    from harnessevolve.core.documents import bounded_yaml

    if rel not in files:
        raise HarnessError(
            f"{rel} does not exist",
            file="harness.yaml",
            field="agent.config",
            hint=f"create {rel} (mini-swe-agent's YAML config) or point agent.config at it",
        )
    try:
        doc = bounded_yaml(files[rel])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else getattr(exc, "line", None)
        raise HarnessError(
            f"invalid YAML: {str(exc).splitlines()[0]}",
            file=rel,
            field=f"line {line}" if line else "(file)",
            hint="mini-swe-agent's config is YAML with agent/environment/model sections",
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("agent"), dict):
        raise HarnessError(
            "not a mini-swe-agent config (no 'agent' mapping)",
            file=rel,
            field="agent",
            hint="give at least agent.system_template and agent.instance_template",
        )
    for section in ("environment", "model"):
        if section in doc and not isinstance(doc[section], dict):
            raise HarnessError(f"{section} must be a mapping", file=rel, field=section)
    return doc


def check_mini_config(root: Path, rel: str, files: dict[str, str]) -> dict[str, Any]:
    """Check the config against mini-swe-agent's models and render its templates; returns it."""
    import pydantic
    from jinja2 import StrictUndefined, TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    doc = read_mini_config(rel, files)
    import_minisweagent()
    from minisweagent.agents.default import AgentConfig
    from minisweagent.environments.local import LocalEnvironmentConfig
    from minisweagent.models.litellm_model import LitellmModelConfig

    from harnessevolve.harness.agent_env import sample_template_vars

    model_doc = {"model_name": "harnessevolve", **doc.get("model", {})}
    env_doc = {k: v for k, v in doc.get("environment", {}).items() if k != "environment_class"}
    agent_doc = {k: v for k, v in doc["agent"].items() if k not in ("agent_class", "mode")}
    parsed: dict[str, Any] = {}
    for section, model, value in (
        ("agent", AgentConfig, agent_doc),
        ("environment", LocalEnvironmentConfig, env_doc),
        ("model", LitellmModelConfig, model_doc),
    ):
        try:
            parsed[section] = model(**value).model_dump()
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise HarnessError(
                f"{first['msg']} (mini-swe-agent's {model.__name__})",
                file=rel,
                field=f"{section}.{where}" if where else section,
                hint="see mini-swe-agent's config reference; its own config/mini.yaml is an example",
            ) from None
    jinja = SandboxedEnvironment(undefined=StrictUndefined)
    variables = {**parsed["agent"], **parsed["environment"], **parsed["model"], **sample_template_vars()}
    for section, key in TEMPLATES:
        text = parsed[section].get(key)
        if not isinstance(text, str):
            continue
        extra: dict[str, Any] = {}
        if key == "observation_template":
            extra = {"output": SAMPLE_OUTPUT}
        elif key == "format_error_template":
            extra = {
                "error": "No tool calls found",
                "actions": [],
                "has_tool_calls": False,
                "finish_reason": "stop",
            }
        try:
            jinja.from_string(text).render(**variables, **extra)
        except (TemplateError, TypeError, ValueError, AttributeError, KeyError) as exc:
            line = getattr(exc, "lineno", None)
            raise HarnessError(
                f"template does not render with a sample task: {type(exc).__name__}: {exc}".splitlines()[0],
                file=rel,
                field=f"{section}.{key}" + (f" (line {line})" if line else ""),
                hint="fix the Jinja syntax or the variable name (templates see task, the configs and uname)",
            ) from None
    return doc
