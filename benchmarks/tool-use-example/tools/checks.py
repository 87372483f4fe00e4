"""Python checks of tool-use-example (run in the sandbox, given a CheckInput)."""


def cart_after_turn(check):
    """The cart after each user turn equals ``args.after_turn[turn]``."""
    expected = check.args["after_turn"][check.turn]
    if check.state is None:
        return 0.0, "no tool state"
    items = check.state["objects"]["cart:Cart"]["items"]
    return (1.0 if items == expected else 0.0), f"cart {items}, expected {expected}"


def called(check):
    """Some call made ``args.tool`` with ``args.arguments``, and it succeeded."""
    want = check.args
    calls = check.state["calls"] if check.state else []
    for call in calls:
        if call["tool"] == want["tool"] and call["arguments"] == want["arguments"] and not call["error"]:
            return 1.0, f"{want['tool']} was called with {want['arguments']}"
    return 0.0, f"no successful {want['tool']}({want['arguments']}) among {len(calls)} call(s)"
