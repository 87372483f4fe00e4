"""Keeping secrets out of what we write: trajectories, the ledger, reports and error messages.

:func:`redact` replaces with ``[REDACTED]``

* every value of harnessevolve's own environment (at call time) that looks like a credential
  (:func:`env_secrets`): the value of a secret-named variable (``*_API_KEY``, ``*TOKEN*``,
  ``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``, ``*_PASS``, ``*CREDENTIAL*``, ``*_KEY``, ``*_AUTH``;
  8+ characters, not a path), a value shaped like a known credential whatever its name, the user
  info of a URL (``https://user:password@host``, ``https://token@host``), and a token-like value
  (20+ characters of one word, letters and digits mixed, random-looking) whatever its name;
* strings shaped like well-known credentials: OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``,
  AWS access key ids and secret-key assignments, GitHub ``ghp_``/``gho_``/``ghs_``/``github_pat_``,
  Slack ``xox?-``, Google ``AIza``, Hugging Face ``hf_``, ``Bearer`` tokens, PEM private keys,
  passwords in URLs, and generic ``api_key=...`` / ``"password": "..."`` assignments.

Hex digests (git shas, sha256) and ordinary prose are left alone: every pattern needs a
distinctive prefix or a secret-named key before the value.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import os
import re
from typing import Any

REDACTED = "[REDACTED]"

SECRET_ENV_PATTERNS = (
    "*_API_KEY",
    "API_KEY",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PASS",
    "PASS",
    "*_PWD",
    "*CREDENTIAL*",
    "*_KEY",
    "*_AUTH",
    "*COOKIE*",
)
"""fnmatch patterns (matched on the upper-cased name) of environment variables holding secrets."""
MIN_ENV_SECRET_LENGTH = 8
MIN_TOKEN_LENGTH = 20
"""A value of any variable this long, of one word mixing letters and digits, is taken for a token."""
_TOKEN_VALUE = re.compile(r"[A-Za-z0-9_\-.+/=~]+")
_HEXISH = re.compile(r"(?i)[0-9a-f-]+")
_URL_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#@\s]+)@")

# (literals one of which a match must contain, lower-cased; pattern). A pattern runs only when
# one of its literals occurs in the text: a substring test is far cheaper than a regex scan.
# Shaped credentials: the whole match is replaced.
_SHAPED = [
    (
        ("-----begin",),
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    (("sk-",), r"(?<![A-Za-z0-9_-])sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}+"),
    (("akia", "asia"), r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    (("ghp_", "gho_", "ghs_", "ghu_", "ghr_"), r"(?<![A-Za-z0-9_])(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{30,}+"),
    (("github_pat_",), r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}+"),
    (("xox",), r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}+"),
    (("aiza",), r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"),
    (("hf_",), r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}+"),
]
# Credentials recognisable by what precedes them: the prefix (the groups) is kept.
_PREFIXED = [
    (("bearer",), r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}+=*"),
    (("://",), r"(://[^/\s:@]{1,64}:)[^/\s@]{3,}(?=@)"),  # https://user:password@host
    (
        ("secret_access_key", "aws_secret_key"),
        r"(?i)(aws_secret_access_key|secret_access_key|aws_secret_key)(\s*[\"']?\s*[:=]\s*[\"']?)"
        r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    ),
]
_ASSIGNMENT_LITERALS = ("key", "token", "secret", "passw", "pwd")
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9])((?:[A-Za-z0-9]+[_-])*"
    r"(?:api[_-]?key|apikey|secret(?:[_-]?key)?|client[_-]?secret|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|token|password|passwd|pwd|private[_-]?key|access[_-]?key(?:[_-]?id)?))"
    r"(\s*[\"']?\s*[:=]\s*[\"']?)"
    r"([A-Za-z0-9_\-.~+/=@!#%^&*]{8,}+)(?![(\[])"
)
_PLACEHOLDER = re.compile(r"(?i)^(?:[0-9.]+|none|null|true|false|os\.environ.*|getenv.*|x{3,}.*|\*+|\.{3,})$")
_SHAPED_RE = [(literals, re.compile(pattern)) for literals, pattern in _SHAPED]
_PREFIXED_RE = [(literals, re.compile(pattern)) for literals, pattern in _PREFIXED]


def _keep_prefix(match: re.Match[str]) -> str:
    return "".join(g for g in match.groups() if g) + REDACTED


def _assignment(match: re.Match[str]) -> str:
    name, separator, value = match.groups()
    if _PLACEHOLDER.match(value):
        return match.group(0)
    return f"{name}{separator}{REDACTED}"


def _is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS)


def _looks_like_token(value: str) -> bool:
    if (
        len(value) < MIN_TOKEN_LENGTH
        or value.startswith(("/", "~", "."))
        or not _TOKEN_VALUE.fullmatch(value)
    ):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    if _HEXISH.fullmatch(value):  # digests, commit shas, uuids: ids, and they appear in our own files
        return False
    counts = [value.count(c) for c in set(value)]
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= 3.5


def env_secrets(name: str, value: str) -> set[str]:
    """The parts of environment variable ``name=value`` that look like a credential (see the module
    docstring); empty for ordinary settings (paths, names, numbers, flags)."""
    value = value.strip()
    if len(value) < MIN_ENV_SECRET_LENGTH or _PLACEHOLDER.match(value):
        return set()
    found: set[str] = set()
    url = _URL_USERINFO.match(value)
    if url:
        user, _, password = url.group(1).partition(":")
        found.update(part for part in (password or user,) if len(part) >= 6)
    if _is_secret_name(name) and not value.startswith("/") and not url:
        found.add(value)
    lower = value.lower()
    if any(any(lit in lower for lit in literals) and shaped.search(value) for literals, shaped in _SHAPED_RE):
        found.add(value)
    if _looks_like_token(value):
        found.add(value)
    return found


@functools.lru_cache(maxsize=8)
def _env_pattern(environment: tuple[tuple[str, str], ...]) -> re.Pattern[str] | None:
    values = {secret for name, value in environment for secret in env_secrets(name, value)}
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


def env_secret_pattern() -> re.Pattern[str] | None:
    """One regex matching every secret environment value set now (cached per environment)."""
    return _env_pattern(tuple(os.environ.items()))


def redact(text: str, *, env_pattern: re.Pattern[str] | None | bool = True) -> str:
    """``text`` with every secret replaced by ``[REDACTED]``.

    ``env_pattern``: ``True`` (default) reads the environment now; a compiled pattern (from
    :func:`env_secret_pattern`) reuses one; ``None``/``False`` skips environment values."""
    if not text:
        return text
    pattern = env_secret_pattern() if env_pattern is True else env_pattern or None
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    lower = text.lower()
    for literals, shaped in _SHAPED_RE:
        if any(literal in lower for literal in literals):
            text = shaped.sub(REDACTED, text)
    for literals, prefixed in _PREFIXED_RE:
        if any(literal in lower for literal in literals):
            text = prefixed.sub(_keep_prefix, text)
    if any(literal in lower for literal in _ASSIGNMENT_LITERALS):
        text = _ASSIGNMENT.sub(_assignment, text)
    return text


def redact_obj(obj: Any) -> Any:
    """A copy of ``obj`` (dicts, lists, tuples, strings, nested) with every string redacted.

    Dict keys are kept as they are; other values (numbers, None, objects) pass through."""
    env = env_secret_pattern()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, env_pattern=env)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, tuple):
            return tuple(walk(item) for item in value)
        return value

    return walk(obj)
