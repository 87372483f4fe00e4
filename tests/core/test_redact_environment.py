"""Redaction of credentials taken from harnessevolve's own environment, whatever their names (issue 26):
tokens, passwords, URLs with user info; ordinary settings (paths, names, digests) left alone."""

from __future__ import annotations

import pytest

from harnessevolve.core.redact import REDACTED, env_secrets, redact


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("DATABASE_URL", "postgres://svc:hunter2-db-pass@db.internal/app", "hunter2-db-pass"),
        ("GIT_REMOTE", "https://x-oauth-token-4b8c1a@git.example.com/org/repo", "x-oauth-token-4b8c1a"),
        ("CI_JOB_JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl", None),
        ("SESSION_BLOB", "Zk3qP9vL2mX8rT5wY1nB7cD4", None),
        ("GH_AUTH", "plain-auth-value", None),
        ("NPM_CONFIG_TOKENFILE_PASSWD", "opensesame", None),
        ("HUB_CREDENTIALS", "user:pa55word", None),
        ("SERVICE_PASS", "letmein123", None),
        ("UPLOAD_COOKIE", "cookie-value-77", None),
    ],
)
def test_environment_credentials_are_redacted_whatever_their_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, secret: str | None
) -> None:
    monkeypatch.setenv(name, value)
    secret = secret or value
    assert secret in env_secrets(name, value)
    assert secret not in redact(f"the error said: {secret} (from {name})")
    assert REDACTED in redact(f"the error said: {secret}")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/root"),
        ("GITHUB_SHA", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
        ("RUN_UUID", "123e4567-e89b-12d3-a456-426614174000"),
        ("LANG", "C.UTF-8"),
        ("CONTAINER_NAME", "uid-czpmhg-gbhtkj-smnmnh"),
        ("PYTHON_VERSION", "3.11.7"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1234"),
        ("LOG_FORMAT", "%(asctime)s %(levelname)s %(message)s"),
        ("PWD", "/work/main"),
    ],
)
def test_ordinary_settings_are_not_credentials(name: str, value: str) -> None:
    assert env_secrets(name, value) == set()
