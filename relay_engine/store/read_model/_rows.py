"""What the read model's readers share: long key lists read in chunks (one ``IN`` each),
long texts clipped in views.

Private to :mod:`relay_engine.store.read_model`: its modules import these, nothing else does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

TEXT_KEPT = 1000
"""Errors and results are clipped in views (the detail screen reads them whole): 50,000
tasks with agent-sized texts must not fill a console's memory."""
CHUNK = 500


def _clipped(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_KEPT else text[: TEXT_KEPT - 1] + "…"


def _whole(text: str | None) -> str | None:
    return text


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
