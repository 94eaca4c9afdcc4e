"""What relay stores fits its database: text with no NUL and no lone surrogate, numbers
finite and within 64 bits.

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
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def storable(value: Any) -> Any:
    """``value`` (a string, a number, or parameters: dicts, lists and tuples of them) with
    no NUL and no lone surrogate in any string and no number a column cannot hold; the same
    object when it had none."""
    return _cleaned(value) if _holds_unstorable(value) else value


def storable_json(value: Any, **options: Any) -> str:
    """``json.dumps`` of the storable value: the escapes ``\\u0000`` and a lone ``\\ud83d``,
    and ``Infinity`` and ``NaN``, never reach the database."""
    return json.dumps(storable(value), **options)


def _text(text: str) -> str:
    return UNSTORABLE.sub(lambda found: "" if found[0] == "\x00" else REPLACEMENT, text)


def _number_fits(value: int | float) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return INT64_MIN <= value <= INT64_MAX


def _holds_unstorable(value: Any) -> bool:
    if isinstance(value, str):
        return UNSTORABLE.search(value) is not None
    if isinstance(value, (int, float)):
        return not _number_fits(value)
    if isinstance(value, dict):
        return any(_holds_unstorable(k) or _holds_unstorable(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_unstorable(item) for item in value)
    return False


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (int, float)):
        return value if _number_fits(value) else None
    if isinstance(value, dict):
        return {_cleaned(key): _cleaned(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cleaned(item) for item in value)
    return value
