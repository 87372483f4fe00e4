"""Every model call goes through litellm. Providers shipped in the package: ``scripted/`` (tests,
and usable from the CLI) and ``local/`` (the embedded default model)."""

from harnessevolve.models.call import ModelReply, ModelToolCall, acomplete

__all__ = ["ModelReply", "ModelToolCall", "acomplete"]
