"""Numbers read from agents' output, kept only when they can mean what they claim to.

Agents' JSON and text say how many tokens a run used, what it cost and when a limit
resets. ``json.loads`` hands over ``1e400`` as an infinity, ``NaN`` as itself and a
400-digit integer whole, and a regular expression's digits can be as long: such a number
raised in the arithmetic after it (``int(inf)``, a float too large), or reached the
database, which refused it, and stopped the engine. A number that cannot be what it
claims to be is unknown (None) from here on.

Pure: no I/O.
"""

from __future__ import annotations

import math
from datetime import datetime

COUNT_MAX = 10**15  # more tokens than any session uses, and well within 64 bits
AMOUNT_MAX = 10.0**9  # dollars: more than any run costs
EPOCH_MAX = 253402300799.0  # 9999-12-31 23:59:59 UTC, the last moment a clock can show


def as_number(value: object) -> float | None:
    """A JSON number (or digits read from text) as a finite float; None for anything
    else, a bool included."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return number if math.isfinite(number) else None


def as_count(value: object) -> int | None:
    """A token count, or None when the number cannot be one (negative, not finite, or more
    than any session uses): a price times a count of 10**30 exhausted the job's budget."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else as_number(value)
    if number is None or not 0 <= number <= COUNT_MAX:
        return None
    return int(number)


def as_amount(value: object) -> float | None:
    """A run's cost in dollars, or None when the number cannot be one (negative, not
    finite, or more than any run costs)."""
    number = as_number(value)
    return number if number is not None and 0 <= number <= AMOUNT_MAX else None


def epoch_seconds(value: object) -> float | None:
    """A moment as the CLIs give one (epoch seconds or milliseconds, as a number or digits,
    or an ISO-8601 string) in epoch seconds; None for anything else, and for a moment no
    clock can show (formatting it raised)."""
    if isinstance(value, str):
        value = _epoch_of_text(value.strip())
    number = as_number(value)
    if number is None:
        return None
    seconds = number / 1000.0 if number > 1e12 else number
    return seconds if 0 <= seconds <= EPOCH_MAX else None


def _epoch_of_text(text: str) -> float | int | None:
    if text.isascii() and text.isdigit():
        return int(text) if len(text) <= 20 else None  # longer: past any clock (and int's limit)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
