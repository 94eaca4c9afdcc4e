"""Screens that close exactly once.

``dismiss`` runs the result callback at once but pops the screen later, so a second key
(enter enter, escape escape) reaches a screen that is already closing: it would send its
command again and pop the screen below, ending the app with "No screens on stack".
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen


class ClosesOnce:
    """Mixin for a :class:`Screen`: :meth:`close_once` dismisses it, later calls do nothing."""

    _dismissing = False  # not "_closing": MessagePump has that, and setting it wedges the app

    def close_once(self, value: Any = None) -> None:
        screen: Screen[Any] = self  # type: ignore[assignment]
        if self._dismissing or not screen.is_active:
            return
        if not screen.is_mounted:  # popping a screen that is still mounting empties the stack
            screen.call_after_refresh(self.close_once, value)
            return
        self._dismissing = True
        screen.dismiss(value)
