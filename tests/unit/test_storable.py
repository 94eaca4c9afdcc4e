"""What relay stores holds no NUL and no lone surrogate, and loses nothing else."""

from __future__ import annotations

import json

from relay_engine.store.storable import storable, storable_json


def test_parameters_lose_nul_and_mark_a_lone_surrogate_in_every_shape_a_statement_sends() -> None:
    assert storable({"error": "bad\0byte", "attempt": 2}) == {"error": "badbyte", "attempt": 2}
    assert storable(("cut \ud83d", None, 1.5)) == ("cut \ufffd", None, 1.5)
    assert storable([{"m": "x\0y"}, {"m": "z"}]) == [{"m": "xy"}, {"m": "z"}]
    assert storable({"\udc00key": ["\0"]}) == {"\ufffdkey": [""]}


def test_clean_parameters_are_the_same_object() -> None:
    """Every statement passes through: nothing is copied when there is nothing to change."""
    parameters = {"error": "fine ✔ 😀", "keys": ["a", "b"], "n": 3}
    assert storable(parameters) is parameters


def test_json_keeps_whole_characters_and_quoted_escapes() -> None:
    """An emoji (a surrogate pair in JSON's escapes) and an agent quoting ``\\u0000`` stay."""
    value = {"ok": "😀", "quoted": "write \\u0000 for NUL", "bad": "a\0b\ud83d"}
    text = storable_json(value)
    assert json.loads(text) == {"ok": "😀", "quoted": "write \\u0000 for NUL", "bad": "ab\ufffd"}
    assert "\\u0000" not in text.replace("\\\\u0000", "") and "\\ud83d\\ude00" in text


def test_numbers_no_column_holds_are_stored_as_unknown() -> None:
    """An integer past 64 bits fails both databases' binding (JSON's numbers hold it); JSON
    has no infinity or NaN."""
    huge, nan = 10**20, float("nan")
    assert storable({"tokens": huge, "cost": float("inf"), "n": 2**63 - 1}) == {
        "tokens": None, "cost": None, "n": 2**63 - 1}  # fmt: skip
    assert storable((-(2**63) - 1, nan, True)) == (None, None, True)
    assert json.loads(storable_json({"ratio": float("-inf"), "ok": 1.5})) == {
        "ratio": None,
        "ok": 1.5,
    }
    assert json.loads(storable_json({"n": 10**30, "bad": "a\0b"})) == {"n": 10**30, "bad": "ab"}
    finite = {"at": 1764600000.25, "attempt": 3}
    assert storable(finite) is finite
