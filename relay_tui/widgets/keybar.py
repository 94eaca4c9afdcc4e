"""The key line at the bottom of every screen: the keys that act here, fitted to the width.

Textual's Footer lays its keys out in a grid that cuts the last ones mid-word at 80 columns
(``…Filter/searc▏^p paletteQ``) and loses ``? Help q Quit``. This line is plain text: the
keys of the focused widget first, then the screen's, dropped from the end until they fit,
and help, the palette and quit always at the right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

TAIL_ACTIONS = ("app.command_palette", "command_palette", "help", "app.help", "quit", "app.quit")
"""Always at the right when active (the palette only while there is room)."""
SHORT = {"command_palette": "palette"}


def hidden(app: object, action: str) -> bool:
    """Keys that work but are offered only when they apply (``g`` for a gated job)."""
    hide = getattr(app, "key_hidden", None)
    return bool(hide and hide(action.removeprefix("app.")))


def key_items(bindings: Iterable[tuple[Binding, bool, str]]) -> list[tuple[str, str, bool]]:
    """(key shown, description, enabled) per action, once each, in the order given."""
    seen: set[str] = set()
    items = []
    for binding, enabled, key in bindings:
        if binding.action in seen:
            continue
        seen.add(binding.action)
        items.append((key, binding.description, enabled))
    return items


def fit_keys(
    items: Sequence[tuple[str, str, bool]],
    tail: Sequence[tuple[str, str, bool]],
    width: int,
    key_style: str = "bold",
) -> Text:
    """The items that fit in ``width`` after the tail, then the tail right-aligned; the
    palette hint in the tail gives way first."""
    tail = list(tail)
    while tail and _width(tail) + 1 > width and len(tail) > 2:
        tail.pop(0)  # the palette hint: ctrl+p still works
    room = width - _width(tail) - 1
    shown: list[tuple[str, str, bool]] = []
    for item in items:
        if _width([*shown, item]) > room:
            break
        shown.append(item)
    text = Text(no_wrap=True, overflow="crop", end="")
    _append(text, shown, key_style)
    gap = max(1, width - text.cell_len - _width(tail))
    text.append(" " * gap)
    _append(text, tail, key_style)
    return text


def _width(items: Sequence[tuple[str, str, bool]]) -> int:
    return sum(len(key) + 1 + len(words) for key, words, _on in items) + 2 * max(0, len(items) - 1)


def _append(text: Text, items: Sequence[tuple[str, str, bool]], key_style: str) -> None:
    for index, (key, words, enabled) in enumerate(items):
        if index:
            text.append("  ")
        text.append(key, style=key_style if enabled else "dim")
        text.append(f" {words}", style="" if enabled else "dim")


class KeyBar(Static):
    """One line of keys for the screen it is on; follows focus and the keymap."""

    DEFAULT_CLASSES = "keybar"

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self.refresh_keys)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_resize(self) -> None:
        self.refresh_keys()

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh_keys()

    def refresh_keys(self) -> None:
        if not self.is_attached or not self.size.width:
            return
        items, tail = self.collect()
        self.update(fit_keys(items, tail, self.size.width))

    def collect(self) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str, bool]]]:
        """The screen's shown keys (focused widget first) and the tail's."""
        app = self.app
        body: list[tuple[Binding, bool, str]] = []
        tail: dict[str, tuple[Binding, bool, str]] = {}
        for active in self.screen.active_bindings.values():
            binding = active.binding
            action = binding.action.removeprefix("app.")
            if action in TAIL_ACTIONS:
                if action not in tail or (binding.id and not tail[action][0].id):  # ours: q
                    tail[action] = (binding, active.enabled, app.get_key_display(binding))
            elif binding.show and not hidden(app, binding.action):
                body.append((binding, active.enabled, app.get_key_display(binding)))
        ordered = [tail[a] for a in ("command_palette", "help", "quit") if a in tail]
        tail_items = [
            (key, SHORT.get(binding.action.removeprefix("app."), binding.description), enabled)
            for binding, enabled, key in ordered
        ]
        return key_items(body), tail_items
