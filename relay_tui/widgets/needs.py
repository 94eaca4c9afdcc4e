"""The Needs-you table: what agents wait on the operator for, oldest first.

One row per open ask: how long it has waited, the task and agent, the tool and its exact
input (``Bash npm test``) or the question, and the agent's last message. ``y`` allows it
once, ``A`` always (a scope picker shows the rule it adds), ``n`` denies it with an
optional message, ``enter`` reads the whole input (a long command, a diff) and answers a
question. The keys belong to this table, so they act only where the cursor is on an ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding

from relay_tui.data.snapshot import Snapshot
from relay_tui.render.asks import wants
from relay_tui.render.styles import clip, short_duration
from relay_tui.widgets.live_table import NOTE_CHARS, LiveTable, Row

ASK_ROW = "ask:"


def ask_id_of(key: str | None) -> int | None:
    if not key or not key.startswith(ASK_ROW):
        return None
    try:
        return int(key.removeprefix(ASK_ROW))
    except ValueError:
        return None


class NeedsTable(LiveTable):
    BINDINGS = [
        Binding("y", "app.answer_ask('allow')", "Allow once", id="ask-allow"),
        Binding("A", "app.answer_ask('always')", "Allow always…", id="ask-always"),
        Binding("n", "app.answer_ask('deny')", "Deny…", id="ask-deny"),
        Binding("enter", "app.read_ask", "Read/answer", id="ask-read"),
    ]
    COLUMNS = (
        ("age", "Age", 4),
        ("task", "Task", 10),
        ("agent", "Agent", 8),
        ("wants", "Wants", 12),
        ("context", "Its last message", 8),
    )
    FLEX: ClassVar[Mapping[str, int]] = {"task": 1, "wants": 3, "context": 2}
    OPTIONAL: ClassVar[Mapping[str, int]] = {"agent": 90, "context": 70}

    def build_rows(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> list[Row]:
        rows: list[Row] = []
        for ask in snapshot.asks:
            late = ask.timeout_at is not None and ask.timeout_at - now < 300
            age = Text(short_duration(now - ask.asked_at), end="")
            age.stylize(styles.get("FAILED" if late else "PARKED", ""))
            rows.append(
                (
                    f"{ASK_ROW}{ask.id}",
                    (
                        age,
                        ask.task_key or f"{ask.job_id} planner",
                        ask.agent,
                        Text(clip(wants(ask), NOTE_CHARS), style="bold", end=""),
                        Text(clip(ask.context or "", NOTE_CHARS), style="dim", end=""),
                    ),
                )
            )
        return rows

    def apply(self, snapshot: Snapshot, now: float, styles: Mapping[str, str]) -> None:
        self.sync(self.build_rows(snapshot, now, styles), keep_order=True)

    def preview(self, key: str | None, snapshot: Snapshot) -> str:
        ask = snapshot.ask(ask_id_of(key))
        if ask is None:
            return ""
        rule = f" · A adds {ask.suggested_rule}" if ask.suggested_rule else ""
        said = f" · it said: {ask.context}" if ask.context else ""
        return f"{ask.task_key or ask.job_id} ({ask.agent}) {wants(ask)}{rule}{said}"
