"""Messages between the console's threads, widgets and screens, named for what happened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from relay_tui.data.snapshot import Snapshot
from relay_tui.data.stream import StreamItem


@dataclass
class SnapshotLoaded(Message):
    """The reader thread read the database; ``snapshot`` is immutable."""

    snapshot: Snapshot


@dataclass
class CursorMoved(Message):
    """The cursor of the focused pane moved, or another pane took the focus: the row the next
    key acts on may be another (the app reads it again, see :mod:`relay_tui.actions.target`)."""


@dataclass
class FiltersChanged(Message):
    """What a pane shows changed (a level, a view, folded jobs): its title and the status
    line say so again."""


@dataclass
class CommandQueued(Message):
    """An operator command was stored for the engines (``error`` says why it was not)."""

    kind: str
    payload: dict[str, Any]
    command_id: int | None
    error: str | None = None


@dataclass
class EngineStopped(Message):
    """The embedded engine's loop ended (``error`` says why, when it was not asked to)."""

    error: str | None = None


@dataclass
class FeedFailed(Message):
    """Reading the database failed; the reader retries."""

    error: str


@dataclass
class OutputRead(Message):
    """New output of an execution: ``items`` parsed, ``raw`` as written (appended, not all)."""

    execution_id: str
    items: list[StreamItem] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    restarted: bool = False


@dataclass
class DetailRead(Message):
    """A worker finished reading for a screen: ``show`` paints it (on the UI thread).

    Workers post this instead of ``call_from_thread``, which blocks the worker until the UI
    runs the call: closing the screen meanwhile waits for the worker, and both would wait
    for each other.
    """

    show: Callable[[], None]
