"""Runs mini-swe-agent's ``DefaultAgent`` inside the sandbox, for the ``mini-swe-agent`` runner.

``python mini_driver.py CONFIG`` reads mini-swe-agent's own YAML config (the harness's
``agent.config``) and the task file (``$HARNESSEVOLVE_TASK``), then drives ``DefaultAgent`` with

- ``LocalEnvironment``: its commands run in the workspace, which is inside the rollout's sandbox;
- ``EndpointModel``: a mini-swe-agent model that asks the rollout's endpoint (OpenAI API at
  ``$OPENAI_BASE_URL``, model ``$OPENAI_MODEL``), which forwards to harnessevolve's litellm layer;

and saves mini-swe-agent's own serialized trajectory to ``$HARNESSEVOLVE_OUT/mini_trajectory.json``
after every step (the runner converts it to ATIF). Its templates render here, in the sandbox,
never in harnessevolve's process. Imports only mini-swe-agent, openai and the standard library
(no litellm: its import is slow and may reach for the network).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", os.path.join(tempfile.gettempdir(), "mswea"))

OPENAI_PARAMS = ("temperature", "max_tokens", "max_completion_tokens", "top_p", "seed", "stop")
"""``model.model_kwargs`` passed on to the endpoint; litellm-only ones (``drop_params``) are dropped."""
OBSERVATION_TEMPLATE = (
    "{% if output.exception_info %}<exception>{{output.exception_info}}</exception>\n{% endif %}"
    "<returncode>{{output.returncode}}</returncode>\n<output>\n{{output.output}}</output>"
)
"""mini-swe-agent's own default (``LitellmModelConfig.observation_template``)."""


def make_model_class() -> Any:
    import httpx
    from minisweagent.models.utils.actions_toolcall import (
        BASH_TOOL,
        format_toolcall_observation_messages,
        parse_toolcall_actions,
    )
    from openai import OpenAI
    from pydantic import BaseModel

    class EndpointModelConfig(BaseModel):
        model_name: str
        model_kwargs: dict[str, Any] = {}
        observation_template: str = OBSERVATION_TEMPLATE
        format_error_template: str = "{{ error }}"

    class EndpointModel:
        """mini-swe-agent's ``Model`` protocol over the rollout's OpenAI-compatible endpoint."""

        def __init__(self, **kwargs: Any) -> None:
            known = set(EndpointModelConfig.model_fields)
            self.config = EndpointModelConfig(**{k: v for k, v in kwargs.items() if k in known})
            socket_path = os.environ.get("HARNESSEVOLVE_MODEL_SOCKET")  # one hop less than the relay
            if socket_path:
                http = httpx.Client(transport=httpx.HTTPTransport(uds=socket_path), timeout=900)
                self.client = OpenAI(base_url="http://endpoint/v1", http_client=http, max_retries=0)
            else:
                self.client = OpenAI(max_retries=0, timeout=900)

        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            from minisweagent.exceptions import FormatError

            params = {k: v for k, v in (self.config.model_kwargs | kwargs).items() if k in OPENAI_PARAMS}
            response = self.client.chat.completions.create(
                model=self.config.model_name,
                messages=[{k: v for k, v in m.items() if k != "extra"} for m in messages],
                tools=[BASH_TOOL],
                **params,
            )
            spent = response.usage.model_dump() if response.usage else {}
            cost = {"cost": float(spent.get("cost_usd") or 0.0)}
            choice = response.choices[0]
            try:
                actions = parse_toolcall_actions(
                    choice.message.tool_calls or [],
                    format_error_template=self.config.format_error_template,
                    template_kwargs={"finish_reason": choice.finish_reason},
                )
            except FormatError as exc:
                exc.messages[0]["extra"].update(cost, response=response.model_dump(mode="json"))
                raise
            message = choice.message.model_dump(mode="json", exclude_none=True)
            message["extra"] = {"actions": actions, **cost}
            return message

        def format_message(self, **kwargs: Any) -> dict[str, Any]:
            return kwargs

        def format_observation_messages(
            self, message: dict[str, Any], outputs: list[dict[str, Any]], template_vars: dict | None = None
        ) -> list[dict[str, Any]]:
            extra = dict(message).get("extra") or {}
            return format_toolcall_observation_messages(
                actions=extra.get("actions", []),
                outputs=outputs,
                observation_template=self.config.observation_template,
                template_vars=template_vars,
            )

        def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
            return self.config.model_dump()

        def serialize(self) -> dict[str, Any]:
            config = self.config.model_dump(mode="json")
            return {"info": {"config": {"model": config, "model_type": "harnessevolve.EndpointModel"}}}

    return EndpointModel


def main(argv: list[str]) -> int:
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment

    config = yaml.safe_load(Path(argv[1]).read_text())
    task = json.loads(Path(os.environ["HARNESSEVOLVE_TASK"]).read_text())
    out = Path(os.environ["HARNESSEVOLVE_OUT"]) / "mini_trajectory.json"
    agent_config = {k: v for k, v in config["agent"].items() if k not in ("agent_class", "mode")}
    agent_config["output_path"] = out
    if task.get("context"):  # the task's own system context goes ahead of the harness's prompt
        agent_config["system_template"] = f"{task['context']}\n\n{agent_config.get('system_template', '')}"
    env_config = {k: v for k, v in (config.get("environment") or {}).items() if k != "environment_class"}
    env_config["cwd"] = os.getcwd()
    model = make_model_class()(**{**(config.get("model") or {}), "model_name": os.environ["OPENAI_MODEL"]})
    agent = DefaultAgent(model, LocalEnvironment(**env_config), **agent_config)
    try:
        result = agent.run(task["instruction"])
    except Exception as exc:  # noqa: BLE001 - mini-swe-agent saved the trajectory with the exit message
        print(f"mini-swe-agent stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    print(f"mini-swe-agent exit status: {result.get('exit_status', '')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
