"""Messages between the console's workers, widgets and screens (named for what happened)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from relay_tui.data import Snapshot


class SnapshotLoaded(Message):
    """The projection read the database; ``snapshot`` is immutable."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class TaskSelected(Message):
    """The operator moved the cursor onto a task (``key``) or a job/wave header (key None)."""

    def __init__(self, key: str | None, job_id: str | None) -> None:
        super().__init__()
        self.key = key
        self.job_id = job_id


class CommandSent(Message):
    """An operator command reached the engine's inbox (``error`` says why not)."""

    def __init__(
        self, kind: str, payload: dict[str, Any], command_id: int | None, error: str | None = None
    ) -> None:
        super().__init__()
        self.kind = kind
        self.payload = payload
        self.command_id = command_id
        self.error = error


class EngineStopped(Message):
    """The embedded engine's loop returned (or could not run: ``error``)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class OutputTailed(Message):
    """The current lines at the end of an execution's stdout artifact."""

    def __init__(self, execution_id: str, lines: list[str]) -> None:
        super().__init__()
        self.execution_id = execution_id
        self.lines = lines
