"""What relay stores fits its database: text with no NUL and no lone surrogate, numbers
finite (and within 64 bits, but for JSON's).

Agents' words arrive with either. A NUL comes with a binary file printed or ``find
-print0``; PostgreSQL text cannot hold one, and its ``\\u0000`` escape fails ``json`` input.
A lone surrogate comes with a CLI's JSON that cut an emoji in two (``"\\ud83d"``):
``json.loads`` hands it over, and neither SQLite nor PostgreSQL takes it (``surrogates not
allowed``, ``invalid input syntax for type json``). Either made an exit write fail and
``relay run`` stop; the task, left RUNNING, stopped the next engine that ran it once its
lease lapsed.

Numbers come the same way: a CLI reporting ``1e400`` tokens or a result block holding
``NaN`` hands ``json.loads`` an infinity, or an integer past 64 bits. SQLite cannot bind
the integer ("Python int too large"), PostgreSQL refuses it ("out of range"), and JSON has
no infinity; each stopped the engine as the NUL did.

So every statement's parameters pass through :func:`storable` (a ``before_cursor_execute``
hook on every engine :mod:`relay_engine.store.db` makes), and so does every value JSON
columns and plain-row batches serialise (:func:`storable_json`). A NUL is dropped (it says
nothing an operator would miss); a lone surrogate becomes U+FFFD, the mark of a character
that could not be read; a number no column can hold is stored as unknown (NULL, or JSON's
null). Clean values, nearly all of them, pass as the same objects.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"
INT64_MAX = (1 << 63) - 1
_SUSPECT = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)
"""What ASCII JSON text holds when its value may need cleaning: a NUL's escape or a
surrogate's (a lone one, or half of an emoji's pair: the slow path tells)."""


def storable(value: Any) -> Any:
    """``value`` (a string, a number, or parameters: dicts, lists and tuples of them) with
    no NUL and no lone surrogate in any string and no number a column cannot hold; the same
    object when it had none."""
    return _cleaned(value, INT64_MAX) if _holds_unstorable(value, INT64_MAX) else value


def storable_json(value: Any, **options: Any) -> str:
    """``json.dumps`` of the storable value: the escapes ``\\u0000`` and a lone ``\\ud83d``,
    and ``Infinity`` and ``NaN``, never reach the database (a JSON number may be as long as
    it likes). Most values are written once and their text looked at: walking every row of
    a batch beforehand cost an engine more CPU than writing it."""
    options |= {"allow_nan": False, "ensure_ascii": True}  # ASCII: every NUL is escaped
    try:
        text = json.dumps(value, **options)
    except ValueError:  # an infinity or a NaN
        text = None
    if text is not None and ("\\u" not in text or _SUSPECT.search(text) is None):
        return text
    return json.dumps(_cleaned(value, None), **options)


def _text(text: str) -> str:
    return UNSTORABLE.sub(lambda found: "" if found[0] == "\x00" else REPLACEMENT, text)


def _holds_unstorable(value: Any, int_max: int | None) -> bool:
    """Whether ``value`` holds anything to clean; ``int_max`` None lets integers be any
    length (JSON's numbers)."""
    kind = type(value)
    if kind is str:
        return UNSTORABLE.search(value) is not None
    if kind is float:
        return not math.isfinite(value)
    if kind is int:
        return not _int_fits(value, int_max)
    if kind is dict:  # loops, not any(): every statement's parameters come this way
        for key, item in value.items():
            if _holds_unstorable(key, int_max) or _holds_unstorable(item, int_max):
                return True
        return False
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 -- as above
            if _holds_unstorable(item, int_max):
                return True
        return False
    if value is None or kind is bool:
        return False
    return isinstance(value, str | int | float) and _holds_unstorable(_base(value), int_max)


def _cleaned(value: Any, int_max: int | None) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value if _int_fits(value, int_max) else None
    if isinstance(value, dict):
        return {_cleaned(key, int_max): _cleaned(item, int_max) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cleaned(item, int_max) for item in value)
    return value


def _int_fits(value: int, int_max: int | None) -> bool:
    return int_max is None or -int_max - 1 <= value <= int_max


def _base(value: str | int | float) -> str | int | float:
    """A subclass's value as its base type (a ``StrEnum`` member as its string)."""
    for base in (str, int, float):
        if isinstance(value, base):
            return base(value)
    return value
