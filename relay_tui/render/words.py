"""Engine sentences as the console shows them: a few of the engine's messages count
without plurals ("1 parked tasks resumed", "changes 1 times"); until it words them itself,
they are put right here, and only here (toasts, notes, events)."""

from __future__ import annotations

import re

FIXES = (
    (re.compile(r"\b1 parked tasks resumed\b"), "1 parked task resumed"),
    (re.compile(r"\b0 parked tasks resumed\b"), "no parked task to resume"),
    (re.compile(r"\bchanges 1 times\b"), "changes once"),
    (re.compile(r"\b1 (task|agent|command|job)\(s\)"), r"1 \1"),
    (re.compile(r"\b(\d+) (task|agent|command|job)\(s\)"), r"\1 \2s"),
)


def english(text: str | None) -> str:
    if not text:
        return text or ""
    for pattern, words in FIXES:
        text = pattern.sub(words, text)
    return text
