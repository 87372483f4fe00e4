"""``loop.refuse_placeholders``: a value that looks made up (and appears nowhere in what the agent
was told) is answered once instead of run -- on BFCL's real tools and on tool-use-example's cart --
and no value of any reference run in the repository looks made up."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from scored_run import scored_run
from test_tool_use import call, rollout

from harnessevolve.core import paths
from harnessevolve.core.placeholder_values import suspects, untold, why_placeholder

TOOL_AGENT = paths.builtin_dir("harnesses") / "tool-agent"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("password", "your_password", "a fill-in marker"),
        ("client_id", "<client_id>", "a fill-in marker"),
        ("file", "{file_name}", "a fill-in marker"),
        ("code", "XXXX-1", "a fill-in marker"),
        ("booking_id", "12345", "a made-up number"),
        ("booking_id", "booking_12345", "a made-up number"),
        ("passport_number", "P12345678", "a made-up number"),
        ("order_id", 12345, "a made-up number"),
        ("order_id", "order_id", "the name 'order_id', not a value"),
        ("receiver_id", "Michael's user_id", "the name 'user_id', not a value"),
        ("account_number", "accountNumber", "the name 'account_number', not a value"),
        ("user", "[USER_ID]", "a fill-in marker"),
    ],
)
def test_a_made_up_value_is_named_with_why(name: str, value: object, why: str) -> None:
    assert why_placeholder(name, value) == why


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("city", "Rivermist"),  # a plain word
        ("title", "Travel Booking"),
        ("destination", "ResearchDocs/ultimate_draft.docx"),
        ("insurance_type", "travel_insurance"),  # snake_case, but no identifier word at its end
        ("budget_limit", "10000"),
        ("symbol", "TSLA"),
        ("id", "ID-778"),  # digits: a real identifier's shape
        ("name", "my_notes.txt"),
        ("token", "abc123"),
        ("flag", True),
        ("message", "Hi Sam, " + "my travel plans have changed " * 4),  # composed text, too long
        # legitimate values of other kinds of tools (SQL, files, web, email, search, patterns):
        ("query", "SELECT first_name, last_name FROM users"),
        ("sort_by", "first_name"),
        ("path", "config/api_key.txt"),
        ("fields", "user_id,email"),
        ("selector", "getElementById"),
        ("subject", "Your refund"),
        ("message", "Your order has been cancelled."),
        ("pattern", "[a-z]"),
        ("pattern", "[ERROR]"),
        ("html", "<div>"),
        ("attribute", "placeholder"),
        ("search_query", "how to write a good search query"),
        ("alphabet", "abcxyz0123456789"),
        ("amount", 112345),
        ("grant_type", "refresh_token"),
    ],
)
def test_a_real_looking_value_is_not(name: str, value: object) -> None:
    assert why_placeholder(name, value) is None


def test_a_value_the_agent_was_told_is_never_a_placeholder() -> None:
    told = 'Log in as your_username with password 12345. {"order_id": "order_id"}'
    made_up = suspects({"username": "your_username", "password": "12345", "order_id": "order_id"})
    assert len(made_up) == 3 and untold(made_up, told) == []
    assert untold(suspects({"order": {"items": ["A1", "<item_id>"]}}), "")[0][:2] == ("items", "<item_id>")


def test_no_value_of_any_reference_run_in_the_repository_looks_made_up() -> None:
    """Every reference trajectory under ``trajectories/`` (BFCL, NL2Bash, HumanEval, the shell and
    tool-use examples: about a thousand calls), read as the check reads a run: no false alarm."""
    calls = 0
    flagged = []
    for path in sorted((REPO / "trajectories").rglob("*.json")):
        doc = json.loads(path.read_text())
        told = ""
        for step in doc.get("steps", []):
            if step["source"] == "user":
                told += "\n" + str(step.get("message"))
            for made in step.get("tool_calls") or []:
                if made["function_name"] != "submit":
                    calls += 1
                    found = untold(suspects(made.get("arguments") or {}), told)
                    flagged += [(path.name, made["function_name"], f) for f in found]
            for result in (step.get("observation") or {}).get("results", []):
                told += "\n" + str(result.get("content"))
    assert calls > 800 and flagged == []


def cart_policy(messages: list[dict], tools: list[dict]) -> dict:
    """A cart filled with a stand-in product, then (told so) with the real ones."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return call("addItem", name="<product_name>", quantity=1)
    if "looks like a placeholder" in results[-1]:
        return call("addItem", name="milk", quantity=1)
    if len(results) == 1 or (len(results) == 2 and "milk" in results[-1] and "bread" not in results[-1]):
        return call("addItem", name="bread", quantity=2)
    if "listCart" not in json.dumps(messages):
        return call("listCart")
    total = results[-1].split('"total": ')[-1].split("}")[0].strip() if '"total"' in results[-1] else "?"
    return call("submit", answer=total)


def test_a_cart_item_given_as_a_placeholder_is_answered_not_added(scripts) -> None:
    bench = paths.builtin_dir("benchmarks") / "tool-use-example"
    trajectory, result = rollout(
        bench,
        "cart-total",
        scripts("cart-placeholder", cart_policy),
        loop={"refuse_placeholders": True},
        harness_dir=TOOL_AGENT,
    )
    first = trajectory.agent_steps[0]
    assert first.observations[0].content.startswith(
        "error: addItem was not run: name='<product_name>' looks like a placeholder (a fill-in marker)"
    )
    assert first.extra["error"] == "placeholder_value: addItem"
    assert trajectory.extra["placeholders"][0]["values"] == [
        {"argument": "name", "value": "<product_name>", "why": "a fill-in marker"}
    ]
    assert result.passed
    plain, result = rollout(
        bench, "cart-total", scripts("cart-placeholder-plain", cart_policy), harness_dir=TOOL_AGENT
    )
    assert not result.passed and "placeholders" not in plain.extra  # the stand-in went into the cart


def test_the_same_call_made_again_runs(scripts) -> None:
    def stubborn(messages: list[dict], tools: list[dict]) -> dict:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        return (
            call("addItem", name="your_item", quantity=1) if len(results) < 2 else call("submit", answer="0")
        )

    bench = paths.builtin_dir("benchmarks") / "tool-use-example"
    trajectory, _ = rollout(
        bench, "cart-total", scripts("cart-stubborn", stubborn), loop={"refuse_placeholders": True},
        harness_dir=TOOL_AGENT,
    )  # fmt: skip
    first, second = (s.observations[0].content for s in trajectory.agent_steps[:2])
    assert "looks like a placeholder" in first and "looks like a placeholder" not in second
    assert len(trajectory.extra["placeholders"]) == 1


def test_a_bfcl_booking_id_made_up_is_answered_and_the_real_one_passes(scripts) -> None:
    """The 1.5B's own mistake on BFCL (multi-turn-base-184): the invoice asked for with
    ``booking_id='booking_12345'`` where the booking made two calls before returned its id. Run, the
    tool fails and the task scores less; refused once, the agent (here a script) uses the real id."""
    pytest.importorskip("bfcl_eval")
    from harnessevolve.adapters import load_benchmark_spec
    from harnessevolve.execute.tool_server import benchmark_sandbox
    from harnessevolve.harness.load import load_harness
    from harnessevolve.scoring.references import gold_replies

    bench = load_benchmark_spec("bfcl:base:184")
    task = bench.tasks[0]
    gold = gold_replies(task)
    target = next(
        i for i, r in enumerate(gold) for c in r.get("tool_calls", []) if c["name"] == "retrieve_invoice"
    )
    made_up = json.loads(json.dumps(gold[target]))
    made_up["tool_calls"][0]["arguments"]["booking_id"] = "booking_12345"
    sandbox = benchmark_sandbox(None, bench)

    def policy_for() -> object:
        replies = [*gold[:target], made_up, *gold[target + 1 :]]
        at = [0]

        def policy(messages: list[dict], tools: list[dict]) -> dict:
            last = messages[-1]
            if last["role"] == "tool" and "looks like a placeholder" in str(last["content"]):
                return gold[target]  # told, it uses the id the booking returned
            reply = replies[min(at[0], len(replies) - 1)]
            at[0] += 1
            return reply

        return policy

    def score(check: bool) -> tuple[float, list[dict]]:
        harness = load_harness(TOOL_AGENT)
        harness = replace(harness, loop=replace(harness.loop, refuse_placeholders=check, max_steps=50))
        model = scripts(f"bfcl-placeholder-{check}", policy_for())
        score, run = scored_run(harness, task, model, sandbox)
        return score, run.extra.get("placeholders", [])

    plain, refused = score(False)
    assert plain < 1.0 and refused == []
    checked, refused = score(True)
    assert checked == 1.0
    assert [(r["tool"], r["values"]) for r in refused] == [
        (
            "retrieve_invoice",
            [{"argument": "booking_id", "value": "booking_12345", "why": "a made-up number"}],
        )
    ]


def test_a_call_is_refused_once_for_all_its_values_and_only_a_tasks_own_tool_is_checked() -> None:
    from harnessevolve.core.transcript import Transcript
    from harnessevolve.execute.call_checks import checked_call
    from harnessevolve.execute.loop_state import Rollout
    from harnessevolve.execute.rollout_tools import OfferedTool
    from harnessevolve.harness.model import LoopSettings, ToolSpec
    from harnessevolve.models.call import ModelToolCall

    schema = {"type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}
    served = OfferedTool(ToolSpec("login", "Log in.", schema), served=True)
    notes = OfferedTool(ToolSpec("notes", "Your notes.", {"type": "object"}))  # a component's tool
    tools = {"login": served, "notes": notes}
    rollout = Rollout(Transcript())
    rollout.transcript.add_text("system", "You help users.")
    rollout.transcript.add_text("user", "Log me in.")
    loop = LoopSettings(refuse_placeholders=True)
    made_up = ModelToolCall("c1", "login", {"user": "your_username", "password": "your_password"})
    first = checked_call(made_up, loop, tools, rollout)
    assert first.kind == "placeholder_value"
    assert (
        first.error is not None and "user='your_username', password='your_password' look like" in first.error
    )
    rollout.transcript.add_text("tool", first.error)  # quoted in the refusal: still not told
    again = checked_call(made_up, loop, tools, rollout)
    assert again.error is None and len(rollout.extra["placeholders"]) == 1  # asked once per call
    other = ModelToolCall("c2", "login", {"user": "your_username", "password": "hunter2"})
    assert checked_call(other, loop, tools, rollout).kind == "placeholder_value"  # another call
    note = ModelToolCall("c3", "notes", {"text": "find the order_id"})
    assert checked_call(note, loop, tools, rollout).error is None
    assert checked_call(made_up, LoopSettings(), tools, Rollout(Transcript())).error is None  # off


def test_a_value_the_tools_schema_or_system_message_gives_is_told() -> None:
    from harnessevolve.core.transcript import Transcript
    from harnessevolve.execute.loop_state import Rollout
    from harnessevolve.execute.placeholder_check import hold_placeholder

    rollout = Rollout(Transcript())
    rollout.transcript.add_text("system", "Policy: the guest account is your_guest.")
    rollout.offered = ({"function": {"name": "sort", "parameters": {"enum": ["customer_name"]}}},)
    assert hold_placeholder(rollout, "login", {"user": "your_guest"}) is None
    assert hold_placeholder(rollout, "sort", {"name": "customer_name"}) is None
    assert hold_placeholder(rollout, "sort", {"name": "account_name"}) is not None
