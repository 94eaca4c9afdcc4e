"""Every key, its binding id (for the ``[keymap]`` table of relay.toml) and what it does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

KEYMAP_HINT = 'Remap any key in relay.toml, e.g.  [keymap]  cancel = "x"   (by binding id)'


def key_rows(bindings: Iterable[Binding], keymap: Mapping[str, str]) -> list[tuple[str, str, str]]:
    rows = []
    for binding in bindings:
        if not binding.id:
            continue
        keys = keymap.get(binding.id) or binding.key_display or binding.key
        rows.append((keys, binding.description, binding.id))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close", id="help-close")]

    def __init__(self, bindings: Iterable[Binding], keymap: Mapping[str, str]) -> None:
        super().__init__(classes="dialog-screen")
        self.key_rows = key_rows(bindings, keymap)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help") as box:
            box.border_title = "relay keys"
            box.border_subtitle = "escape closes"
            table: DataTable[str | Text] = DataTable(cursor_type="none", id="keys")
            table.add_columns("Key", "Action", "Binding id")
            for keys, description, binding_id in self.key_rows:
                table.add_row(Text(keys, style="bold"), description, binding_id)
            yield table
            yield Static(KEYMAP_HINT, classes="hint")
            yield Static(
                "Glyphs: ○ draft  ◌ queued  ▶ running  ‖ parked  ✔ succeeded  ✘ failed  "
                "⊘ cancelled  ⊗ blocked.   ctrl+p: command palette",
                classes="hint",
            )
