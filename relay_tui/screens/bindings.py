"""Which bindings are active together: a screen's, the app's, and the focused widget's.

A key remapped in relay.toml must not land on a key another binding of the same group
holds: Textual would drop that binding without a word (``cancel = "x"`` took Close PR's key,
and help listed ``x`` twice).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget

from relay_tui.screens.detail import DetailScreen
from relay_tui.screens.job import JobScreen
from relay_tui.screens.main import MainScreen
from relay_tui.screens.usage import UsageScreen
from relay_tui.widgets.events import EventList, FollowLog
from relay_tui.widgets.live_table import LiveTable
from relay_tui.widgets.needs import NeedsTable

FOCUSED: dict[type[Screen[Any]], tuple[type[Widget], ...]] = {
    MainScreen: (LiveTable, NeedsTable, EventList),
    DetailScreen: (FollowLog,),
    JobScreen: (),
    UsageScreen: (),
}
"""The widgets that take the focus on each screen, with bindings of their own."""


def bindings_of(cls: type) -> list[Binding]:
    """A class's bindings with its bases' (as Textual merges them), each key its own."""
    found: list[Binding] = []
    for base in reversed(cls.__mro__):
        for binding in vars(base).get("BINDINGS", ()):
            if isinstance(binding, Binding):
                found += list(Binding.make_bindings([binding]))
    return found


def binding_groups(app_bindings: Iterable[BindingType]) -> list[list[Binding]]:
    app = list(Binding.make_bindings(list(app_bindings)))
    groups = []
    for screen, widgets in FOCUSED.items():
        own = [*screen.BINDINGS, *app]
        screen_bindings = list(Binding.make_bindings(own))
        groups.append(screen_bindings)
        groups += [[*bindings_of(widget), *screen_bindings] for widget in widgets]
    return groups
