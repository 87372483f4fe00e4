"""The ``placeholder_value`` pattern (failed runs that passed a task's tool a made-up value they
were never told) and the lever it proposes, ``loop.refuse_placeholders``: on tool-use-example's
cart and on BFCL's tools, as the 1.5B called them."""

from __future__ import annotations

import dataclasses

from test_behaviour_proposer import off_list_context, propose, tasks_of

from harnessevolve.optimize.proposal import ReferenceAction
from harnessevolve.optimize.trajectory_patterns import DETECTORS, find_patterns, placeholder_value


def cart_tools() -> dict:
    return {
        t.name: {"description": t.description, "parameters": t.parameters}
        for t in tasks_of("tool-use-example")[0].tools
    }


def test_a_made_up_value_turns_on_refuse_placeholders() -> None:
    assert placeholder_value in DETECTORS
    failed = {
        "a": (ReferenceAction("addItem", {"name": "<product_name>", "quantity": 1}, "added"),),
        "b": (ReferenceAction("addItem", {"name": "milk", "quantity": 1}, "added"),),
    }
    ctx = off_list_context(cart_tools(), failed)
    (pattern,) = [p for p in find_patterns(ctx) if p.kind == "placeholder_value"]
    assert pattern.tasks == ("a",)
    assert pattern.detail == {
        "tool": "addItem",
        "argument": "name",
        "value": "<product_name>",
        "why": "a fill-in marker",
    }
    candidate = propose(ctx)
    assert list(candidate.edits) == [{"op": "set_loop", "setting": "refuse_placeholders", "value": True}]
    assert candidate.summary == "answer calls with made-up values instead of running them"
    told = "addItem name='<product_name>' (a fill-in marker), a value they were never told"
    assert told in candidate.rationale


def test_bfcl_calls_with_made_up_ids_show_it_and_a_value_told_before_does_not() -> None:
    """BFCL calls as the 1.5B made them: an invoice asked for with a made-up booking id, a login
    with ``your_password``; a booking id a result returned before the call is no placeholder, nor
    is one the instruction gives."""
    tools = {
        name: {"description": name, "parameters": {"type": "object", "properties": {p: {"type": "string"}}}}
        for name, p in (
            ("retrieve_invoice", "booking_id"),
            ("ticket_login", "password"),
            ("cancel", "booking_id"),
        )
    }
    failed = {
        "t1": (
            ReferenceAction("book_flight", {"travel_date": "2026-12-15"}, '{"booking_id": "3426812"}'),
            ReferenceAction("retrieve_invoice", {"booking_id": "booking_12345"}, "error: booking not found"),
        ),
        "t2": (ReferenceAction("ticket_login", {"password": "your_password"}, '{"login": false}'),),
        "t3": (
            ReferenceAction("book_flight", {"travel_date": "2026-12-15"}, '{"booking_id": "12345"}'),
            ReferenceAction("cancel", {"booking_id": "12345"}, "{}"),  # the result before gave it
        ),
        "t4": (ReferenceAction("cancel", {"booking_id": "your_booking"}, "{}"),),  # told by the instruction
    }
    ctx = off_list_context(tools, failed)
    ctx = dataclasses.replace(ctx, instructions={"t4": "Cancel booking your_booking."})
    (pattern,) = [p for p in find_patterns(ctx) if p.kind == "placeholder_value"]
    assert pattern.tasks == ("t1", "t2")
    assert pattern.detail["tool"] in ("retrieve_invoice", "ticket_login")
