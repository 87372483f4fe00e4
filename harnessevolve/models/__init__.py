"""Every model call goes through litellm. Providers shipped in the package: ``scripted/`` (tests,
and usable from the CLI) and ``local/`` (the embedded default model). Around each call:
retries (:mod:`.retry`), per-model limits (:mod:`.limits`) and usage metering (:mod:`.usage`)."""

from harnessevolve.models.call import ModelReply, ModelToolCall, acomplete
from harnessevolve.models.limits import ModelLimits, clear_limits, configure_limits, limits_for
from harnessevolve.models.retry import RetryPolicy, is_retryable, retry_policy, set_retry_policy
from harnessevolve.models.usage import Usage, UsageMeter, current_scope, usage_scope

__all__ = [
    "ModelLimits",
    "ModelReply",
    "ModelToolCall",
    "RetryPolicy",
    "Usage",
    "UsageMeter",
    "acomplete",
    "clear_limits",
    "configure_limits",
    "current_scope",
    "is_retryable",
    "limits_for",
    "retry_policy",
    "set_retry_policy",
    "usage_scope",
]
