"""Secrets never reach what we write: key patterns, secret environment values, the ledger, saved
trajectories and CLI error messages; hashes and ordinary text are left alone."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harnessevolve.core import atif
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.redact import REDACTED, redact, redact_obj
from harnessevolve.runs.ledger import Ledger, read_lines

# Fake credentials of the right shapes (none is a real key).
OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
OPENAI_PROJECT = "sk-proj-" + "Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
ANTHROPIC = "sk-ant-api03-" + "q" * 40 + "AA"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
GITHUB = "ghp_" + "1234567890abcdefghijABCDEFGHIJ123456"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyA1234567890abcdefghijklmnopqrstuv"
HUGGINGFACE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7Y\nq2ZcZ==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    "secret",
    [OPENAI, OPENAI_PROJECT, ANTHROPIC, AWS_ID, GITHUB, GITHUB_PAT, SLACK, GOOGLE, HUGGINGFACE, PEM],
    ids=[
        "openai",
        "openai-project",
        "anthropic",
        "aws-id",
        "github",
        "github-pat",
        "slack",
        "google",
        "hf",
        "pem",
    ],
)
def test_shaped_keys_are_redacted(secret: str) -> None:
    text = f"the model said: use {secret} then continue"
    assert redact(text) == f"the model said: use {REDACTED} then continue"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {REDACTED}"),
        (
            "curl -H 'Authorization: Bearer abcDEF123456.ghiJKL789_xyz' x",
            f"curl -H 'Authorization: Bearer {REDACTED}' x",
        ),
        ('{"api_key": "q8w7e6r5t4y3u2i1"}', f'{{"api_key": "{REDACTED}"}}'),
        ("export OPENAI_API_KEY=q8w7e6r5t4y3u2i1", f"export OPENAI_API_KEY={REDACTED}"),
        ("password: hunter2hunter2", f"password: {REDACTED}"),
        ("client_secret='abc123def456'", f"client_secret='{REDACTED}'"),
        (
            "git clone https://bob:s3cr3tpass@example.com/r.git",
            f"git clone https://bob:{REDACTED}@example.com/r.git",
        ),
    ],
    ids=[
        "aws-secret",
        "bearer",
        "json-api-key",
        "env-assignment",
        "password",
        "client-secret",
        "url-password",
    ],
)
def test_assignments_keep_their_name_and_lose_their_value(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_secret_environment_values_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYPROVIDER_API_KEY", "plainvalue-without-shape")
    monkeypatch.setenv("DEPLOY_TOKEN", "t0k3n-of-deploy")
    monkeypatch.setenv("DB_PASSWORD", "correcthorse")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to be worth redacting
    monkeypatch.setenv("EDITOR_THEME", "plainvalue-not-secret")
    text = "saw plainvalue-without-shape and t0k3n-of-deploy and correcthorse; abc; plainvalue-not-secret"
    assert redact(text) == f"saw {REDACTED} and {REDACTED} and {REDACTED}; abc; plainvalue-not-secret"
    monkeypatch.delenv("DB_PASSWORD")
    assert redact("correcthorse") == "correcthorse"  # read at call time, not cached forever


def test_false_positives_are_avoided() -> None:
    sha1 = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    sha256 = hashlib.sha256(b"harness").hexdigest()
    texts = [
        f"commit {sha1}",
        f'{{"harness_hash": "{sha256}", "key": "{sha256}"}}',
        "the token budget is 5000; max_tokens: 4096; total_prompt_tokens: 123456789",
        "Send a password reset link; the bearer of bad news; ask for the secret sauce",
        "task-sk-learn and risk-assessment-and-disk-usage-reports",
        'api_key=os.environ["OPENAI_API_KEY"]  # read from the environment',
        "ls -la /tmp && grep -r TODO src/ | head",
        "https://example.com:8080/path@v2",
    ]
    for text in texts:
        assert redact(text) == text


def test_redact_obj_walks_nested_data_and_keeps_keys() -> None:
    data = {"api_key": OPENAI, "steps": [{"message": f"key {GITHUB}", "n": 3}, (GOOGLE, None)], "ok": True}
    assert redact_obj(data) == {
        "api_key": REDACTED,
        "steps": [{"message": f"key {REDACTED}", "n": 3}, (REDACTED, None)],
        "ok": True,
    }


def test_ledger_lines_are_redacted(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(
        "run_failed",
        generation=1,
        stage="execute",
        error=f"AuthenticationError: Incorrect API key provided: {OPENAI}",
        rev=tmp_path,  # not JSON: written as its (redacted) text
    )
    ledger.close()
    text = (tmp_path / "ledger.jsonl").read_text()
    assert OPENAI not in text and REDACTED in text
    (event,) = read_lines(tmp_path / "ledger.jsonl")
    assert event["error"] == f"AuthenticationError: Incorrect API key provided: {REDACTED}"
    assert event["rev"] == str(tmp_path)


def test_saved_trajectories_are_redacted(tmp_path: Path) -> None:
    trajectory = Trajectory(
        session_id="s",
        agent_name="harnessevolve",
        agent_version="0",
        model_name="scripted/x",
        steps=(
            Step(1, "system", "You are an agent."),
            Step(2, "user", f"My key is {ANTHROPIC}; print env"),
        ),
        extra={"task_id": "t", "note": f"AWS {AWS_ID}"},
    )
    path = tmp_path / "t.json"
    atif.save(trajectory, path)
    text = path.read_text()
    assert ANTHROPIC not in text and AWS_ID not in text
    loaded = atif.load(path)
    assert loaded.steps[1].message == f"My key is {REDACTED}; print env"
    assert json.loads(text)["extra"]["note"] == f"AWS {REDACTED}"


def test_cli_error_messages_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from harnessevolve.cli._errors import handle_errors
    from harnessevolve.core.errors import ModelError

    @handle_errors
    def command() -> None:
        raise ModelError(f"provider refused key {OPENAI}", hint=f"check {HUGGINGFACE}")

    with pytest.raises(typer.Exit):
        command()
    err = capsys.readouterr().err
    assert OPENAI not in err and HUGGINGFACE not in err
    assert f"provider refused key {REDACTED}" in err and f"check {REDACTED}" in err
