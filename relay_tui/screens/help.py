"""Every key, its binding id (for the ``[keymap]`` table of relay.toml) and what it does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from relay_tui.screens.base import Dialog

KEYMAP_HINT = 'Remap any key in relay.toml by its binding id, e.g.  [keymap]  cancel = "delete"'
NOTES = (
    "g approves a gated job's next wave (offered only for gated jobs); m and x act on a job's "
    "pull request; R resets the agent row under the cursor (Providers pane); ~ marks a cost "
    "estimated from the price table. G jumps to the last row, like vim. ctrl+p: palette."
)
GLYPHS = (
    "Glyphs: ○ draft  ◌ queued  ▶ running  ‖ parked  ✔ succeeded  ✘ failed  ⊘ cancelled  ⊗ blocked"
    "  ✎ held  ⊖ dropped  ·  jobs: ◆ active  ◎ reviewing  ◉ ready  ✔ merged  ⊘ closed"
    "  ·  ↳ troubleshooter"
)


def key_rows(bindings: Iterable[Binding], keymap: Mapping[str, str]) -> list[tuple[str, str, str]]:
    rows = []
    seen: set[str] = set()
    for binding in bindings:
        if not binding.id or binding.id in seen:
            continue
        seen.add(binding.id)
        keys = keymap.get(binding.id) or binding.key_display or binding.key
        rows.append((keys, binding.description, binding.id))
    return rows


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help-close")]

    def __init__(self, bindings: Iterable[Binding], keymap: Mapping[str, str]) -> None:
        super().__init__("")
        self.key_rows = key_rows(bindings, keymap)

    def action_close(self) -> None:
        self.answer(None)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help") as box:
            box.border_title = "relay keys"
            box.border_subtitle = "escape closes"
            table: DataTable[str | Text] = DataTable(cursor_type="none", id="keys")
            table.add_columns("Key", "Action", "Binding id")
            for keys, description, binding_id in self.key_rows:
                table.add_row(Text(keys, style="bold"), description, binding_id)
            yield table
            # Text, not markup: "[keymap]" is what the operator types, not a style tag.
            yield Static(Text(KEYMAP_HINT), classes="hint")
            yield Static(Text(NOTES), classes="hint")
            yield Static(Text(GLYPHS), classes="hint")
