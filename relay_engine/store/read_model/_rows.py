"""What the read model's readers share: long texts clipped in views.

Private to :mod:`relay_engine.store.read_model`: its modules import these, nothing else does.
"""

from __future__ import annotations

TEXT_KEPT = 1000
"""Errors and results are clipped in views (the detail screen reads them whole): 50,000
tasks with agent-sized texts must not fill a console's memory."""


def _clipped(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_KEPT else text[: TEXT_KEPT - 1] + "…"


def _whole(text: str | None) -> str | None:
    return text
