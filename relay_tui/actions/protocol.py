"""What the action mixins need from the app they are mixed into.

The mixins are written against this protocol rather than :class:`relay_tui.app.RelayApp`, so
``actions`` never imports ``app``: the app composes the mixins, and the import arrow points
one way only (see the layers contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from textual.screen import Screen

from relay_engine.contracts.config import RelayConfig
from relay_engine.ops.commands import OperatorCommand
from relay_engine.store.db import Store
from relay_engine.store.read_model.tasks import TaskView
from relay_tui.actions.target import Target
from relay_tui.data.snapshot import Snapshot


class ConsoleApp(Protocol):
    """The running console as its keys see it: the state they read and how they answer."""

    BINDINGS: ClassVar[Any]
    snapshot: Snapshot | None
    store: Store
    config: RelayConfig
    workspace: Path
    keymap_in_use: dict[str, str]
    clock: Callable[[], float]
    blink: bool
    state_styles: dict[str, str]

    @property
    def screen(self) -> Screen[Any]: ...

    def notify(
        self, message: str, *, title: str = ..., severity: Any = ..., timeout: float | None = ...
    ) -> None: ...

    def push_screen(self, screen: Screen[Any], callback: Any = ...) -> Any: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def pop_screen(self) -> Any: ...

    def send_command(
        self, command: OperatorCommand, on_applied: Callable[[bool], None] | None = None
    ) -> Any:
        """Store ``command`` for the engines and watch for its outcome (``on_applied`` is
        called with whether it succeeded, once some engine applied it)."""

    def refused_read_only(self) -> bool:
        """True, after saying so, when this console may not send commands at all."""

    def bell(self) -> None: ...

    def run_action(self, action: str) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def call_after_refresh(self, callback: Callable[..., Any], *args: Any) -> bool: ...

    def action_read_ask(self) -> None: ...

    def open_take_over(self, key: str) -> Any: ...

    def took_over(self, key: str, line: Any, why: str | None) -> None: ...

    def merge_then_hand_back(self, key: str) -> Any: ...

    def update_status(self) -> None: ...

    def current_target(self) -> Target:
        """The row the key that is being handled acts on."""

    def target_task(self) -> TaskView | None:
        """The target's task, or None after telling the operator to move to a task row."""

    def target_job(self) -> str | None:
        """The target's job, or None after telling the operator to move to a job row."""
