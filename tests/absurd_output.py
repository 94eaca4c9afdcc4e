"""Agents' output made hostile: numbers no column or clock holds, and text that steers a
terminal or breaks a database, put into recorded CLI output.

Shared by the parsers' test (tests/unit/test_absurd_numbers.py) and the engine's
(tests/engine/test_hostile_output.py): whatever an agent prints, the engine goes on.
"""

from __future__ import annotations

import json
import random
import re

HUGE_DIGITS = "9" * 5000
ABSURD = {
    "infinity": "1e400",
    "minus-infinity": "-1e400",
    "nan": "NaN",
    "past-64-bits": "1" + "0" * 30,
    "past-a-float": "9" * 400,
    "minus-past-64-bits": "-" + "9" * 30,
    "past-int-digits": HUGE_DIGITS,
}
_MARK = "\ue000number\ue000"
JUNK = ("\x00", "\ud83d", "\x1b[2J", "\x1b]52;c;cm0gLXJm\x07", "[/x]", "\u202e", "\\u0000")
"""A NUL, half an emoji, a screen clear, a clipboard write, a closing markup tag, a
direction override, and the escape of a NUL written out."""


def with_numbers(text: str, absurd: str) -> str:
    """Every number in every JSON line replaced by ``absurd``, and every run of digits in
    the other lines and in the JSON's strings."""
    digits = HUGE_DIGITS if absurd == HUGE_DIGITS else "9" * 400
    lines = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            lines.append(re.sub(r"\d+", digits, line))
            continue
        lines.append(json.dumps(_marked(value, digits)).replace(json.dumps(_MARK), absurd))
    return "\n".join(lines) + "\n"


def _marked(value: object, digits: str) -> object:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _MARK
    if isinstance(value, str):
        return re.sub(r"\d+", digits, value)
    if isinstance(value, dict):
        return {key: _marked(item, digits) for key, item in value.items()}
    if isinstance(value, list):
        return [_marked(item, digits) for item in value]
    return value


def with_junk(text: str, rng: random.Random) -> str:
    """Every JSON line's longer strings (texts, paths, ids; not the short ``type`` names
    the parsers steer by) with one piece of :data:`JUNK` put in at random."""
    lines = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            lines.append(line + rng.choice(JUNK))
            continue
        lines.append(json.dumps(_junked(value, rng)))
    return "\n".join(lines) + "\n"


def _junked(value: object, rng: random.Random) -> object:
    if isinstance(value, str) and len(value) > 12:
        cut = rng.randrange(len(value))
        return value[:cut] + rng.choice(JUNK) + value[cut:]
    if isinstance(value, dict):
        return {key: _junked(item, rng) for key, item in value.items()}
    if isinstance(value, list):
        return [_junked(item, rng) for item in value]
    return value
