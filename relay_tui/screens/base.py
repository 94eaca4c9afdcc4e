"""What every screen shares: closing exactly once, mount handlers that outlive a close
while mounting, dialogs built on those, and the number keys that lead back to the main
screen's panes.

``dismiss`` runs the result callback at once but pops the screen later, so a second key
(enter enter, escape escape) reaches a screen that is already closing: it would send its
command again and pop the screen below, ending the app with "No screens on stack".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen


def pane_keys() -> list[Binding]:
    """1-6 and u on screens above the main one: back to the grid on that pane, or Usage."""
    names = ("Jobs & tasks", "Running agents", "Providers", "Planner waves", "Events", "Needs you")
    return [
        Binding(str(n), f"app.show_pane({n - 1})", name, id=f"pane-{n}", show=False)
        for n, name in enumerate(names, start=1)
    ] + [Binding("u", "app.usage", "Usage", id="usage", show=False)]


T = TypeVar("T")
S = TypeVar("S", bound="Screen[Any]")


def closable_while_mounting(handler: Callable[[S], None]) -> Callable[[S], None]:
    """For a screen's ``on_mount``: a screen popped, or an app quitting, while the screen
    still mounts has lost its widgets when the handler runs, and the handler's queries
    raised NoMatches, which crashed the console (random keys in tmux found it: a dialog
    opened while the palette's Quit was stopping the engine). On a screen still on show a
    missing widget is a bug, and still raises."""

    @functools.wraps(handler)
    def guarded(screen: S) -> None:
        try:
            handler(screen)
        except NoMatches:
            if screen.is_attached and screen in screen.app.screen_stack:
                raise

    return guarded


class ClosesOnce:
    """Mixin for a :class:`Screen`: :meth:`close_once` dismisses it, later calls do nothing."""

    _dismissing = False  # not "_closing": MessagePump has that, and setting it wedges the app

    def close_once(self, value: Any = None) -> None:
        screen = cast("Screen[Any]", self)  # a mixin for screens
        if self._dismissing or not screen.is_active:
            return
        if not screen.is_mounted:  # popping a screen that is still mounting empties the stack
            screen.call_after_refresh(self.close_once, value)
            return
        self._dismissing = True
        screen.dismiss(value)


class Dialog(ClosesOnce, ModalScreen[T], Generic[T]):
    """A modal that dismisses once; later answers are ignored."""

    def __init__(self, target: str) -> None:
        super().__init__(classes="dialog-screen")
        self.target = target
        """The row the dialog acts on, as the operator saw it when pressing the key."""

    def answer(self, value: T | None) -> None:
        self.close_once(value)
