"""The command palette (ctrl+p): every action a key runs, searchable by name.

The provider Textual's palette asks; not to be confused with the engine's operator commands
(:mod:`relay_engine.ops.commands`), which the actions send.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import Any

from textual.await_complete import AwaitComplete
from textual.command import CommandList, CommandPalette, DiscoveryHit, Hit, Hits, Provider
from textual.css.query import NoMatches

ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Cancel task", "Cancel the selected task (asks first)", "cancel_task"),
    ("Retry task", "Queue the selected failed or cancelled task again", "retry_task"),
    ("Replan job", "Run a planner round with your guidance", "replan"),
    ("Pin agent", "Keep an agent on the selected task's workstream", "pin"),
    ("Approve next wave", "Open the wave gate of the selected job", "approve"),
    (
        "Cancel job",
        "Cancel the selected job and all its unfinished tasks (asks first)",
        "cancel_job",
    ),
    ("Merge pull request", "Merge the selected job's pull request (asks first)", "merge"),
    (
        "Close pull request",
        "Close the selected job's pull request and cancel its unfinished work (asks first)",
        "close_pr",
    ),
    ("Raise budget", "Add dollars to the selected job's budget", "raise_budget"),
    ("Reset agent", "Make the selected agent (Providers pane) available again", "reset_agent"),
    ("Usage", "Spend by job, agent and provider; spend over time; budgets", "usage"),
    ("Open", "Task detail (output, diff, events) or the job view with its graph", "open"),
    ("Filter tasks / search events", "Show only matching tasks, or matching events", "filter"),
    ("Cycle sort", "Change the order of the focused table", "cycle_sort"),
    ("Clear filter", "Show every task again", "clear_filter"),
    ("Next pane", "Move focus to the next pane", "next_pane"),
    ("Previous pane", "Move focus to the previous pane", "previous_pane"),
    ("Help", "Every key and its binding id", "help"),
    ("Quit", "Leave the console (stops the embedded engine)", "quit"),
)


class ActionPalette(Provider):
    """Lists the same actions the keys run, so nothing is reachable only by a key."""

    async def discover(self) -> Hits:
        for title, help_text, action in ACTIONS:
            yield DiscoveryHit(title, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, action in ACTIONS:
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(title),
                    partial(self.app.run_action, action),
                    help=help_text,
                )


class SafePalette(CommandPalette):
    """Textual's palette, with page moves that survive a list not laid out yet, closing
    once.

    Two enters in one burst select twice: the second ``dismiss`` pops the screen under the
    palette, the main screen, and the app ends with ``ScreenStackError`` (found by the tmux
    key bursts). A dismiss of a palette that is no longer on top does nothing. A letter
    typed after the selecting enter starts a search in a palette whose list is already
    gone (``NoMatches`` in its worker ended the app): a closing palette searches no more,
    and moves no cursor in that list either.

    ``OptionList._move_page`` reads ``_index_to_line[highlighted]``, a cache that
    ``_update_lines`` fills only while the list has a non-empty content region. The palette
    rebuilds its ``CommandList`` on every keystroke of the search (``clear_options`` empties
    the cache, ``highlighted = 0``) and shows it by a class whose layout happens on the next
    refresh; a PageDown in the same burst as a typed letter reads the empty (or partly
    filled) cache and raises ``KeyError: 0`` (23, 1, …), which ends the app. Until the list
    has lines for its highlighted option, a page move goes to the first or last option.
    """

    def dismiss(self, result: None = None) -> AwaitComplete:
        if self._closing_once or self.app.screen is not self:
            return AwaitComplete(asyncio.sleep(0))
        self._closing_once = True
        return super().dismiss(result)

    _closing_once = False

    @property
    def _list_going(self) -> bool:
        """Closing or detached: its command list may be gone already."""
        return self._closing_once or not self.is_attached

    def _gather_commands(self, search_value: str) -> Any:
        if self._list_going:
            return None
        return super()._gather_commands(search_value)

    def _watch__list_visible(self) -> None:
        with contextlib.suppress(NoMatches):  # closing: its widgets are going
            super()._watch__list_visible()

    def _action_command_list(self, action: str) -> None:
        if self._list_going:
            return
        if action in ("page_up", "page_down"):
            commands = self.query_one(CommandList)
            highlighted = commands.highlighted or 0
            # _index_to_line fills the cache when it can; what _move_page then indexes
            if commands.option_count and highlighted not in commands._index_to_line:
                commands.action_first() if action == "page_up" else commands.action_last()
                return
        super()._action_command_list(action)
