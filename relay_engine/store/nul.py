"""PostgreSQL stores no NUL character in text: relay drops it on the way in.

An agent's output can hold one (a binary file printed, ``find -print0``, a tool's input
copied from either). psycopg refuses such a string, and PostgreSQL refuses ``\\u0000`` when
``json_to_recordset`` turns a batch's JSON into text (``unsupported Unicode escape
sequence``). An exit write holding one failed, and ``relay run`` stopped with it; the task's
row stayed RUNNING until its lease lapsed, then stopped the next engine that ran it. A NUL
says nothing an operator would miss, so it is dropped from every parameter a PostgreSQL
statement sends (:func:`without_nul`, a ``before_cursor_execute`` hook in
:mod:`relay_engine.store.db`) and from the JSON batches of
:mod:`relay_engine.store.plain_rows` (:func:`json_without_nul`). SQLite keeps text as it is.
"""

from __future__ import annotations

import re
from typing import Any

NUL = "\x00"
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
"""``\\u0000`` in JSON text, not ``\\\\u0000`` (an escaped backslash, then ``u0000``)."""


def without_nul(parameters: Any) -> Any:
    """A statement's parameters (one set or many) with NUL dropped from every string; the
    same object when there was none, as there nearly always is."""
    return _cleaned(parameters) if _holds_nul(parameters) else parameters


def json_without_nul(text: str) -> str:
    """JSON text whose strings hold no NUL (``json.dumps`` escapes one as ``\\u0000``)."""
    return _ESCAPED_NUL.sub(r"\1", text) if "\\u0000" in text else text


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(_holds_nul(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(item) for item in value)
    return False


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, "")
    if isinstance(value, dict):
        return {key: _cleaned(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cleaned(item) for item in value)
    return value
