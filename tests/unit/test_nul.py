"""NUL leaves a PostgreSQL statement's text, and nothing else does."""

from __future__ import annotations

import json

from relay_engine.store.nul import json_without_nul, without_nul


def test_parameters_lose_nul_in_every_shape_a_statement_sends() -> None:
    assert without_nul({"error": "bad\0byte", "attempt": 2}) == {"error": "badbyte", "attempt": 2}
    assert without_nul(("a\0", None, 1.5)) == ("a", None, 1.5)
    assert without_nul([{"m": "x\0y"}, {"m": "z"}]) == [{"m": "xy"}, {"m": "z"}]


def test_parameters_without_nul_are_the_same_object() -> None:
    """Every statement passes through: nothing is copied when there is nothing to drop."""
    parameters = {"error": "fine", "keys": ["a", "b"]}
    assert without_nul(parameters) is parameters


def test_json_loses_escaped_nul_but_keeps_an_escaped_backslash_before_u0000() -> None:
    """``\\\\u0000`` in JSON is a backslash and the text ``u0000``: an agent quoting the
    escape keeps it. A NUL inside a nested JSON document (doubly escaped) is a JSON column's
    business, which PostgreSQL's ``json`` type stores."""
    rows = [{"error": "bad\0byte", "quoted": "write \\u0000 for NUL", "data": '{"a": "\\u0000"}'}]
    text = json_without_nul(json.dumps(rows))
    assert json.loads(text) == [
        {"error": "badbyte", "quoted": "write \\u0000 for NUL", "data": '{"a": "\\u0000"}'}
    ]
    clean = json.dumps(rows[:0])
    assert json_without_nul(clean) is clean
