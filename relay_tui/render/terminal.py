"""The last step before the terminal: nothing the console draws can steer it.

Textual writes a widget's text to the terminal as it is; an ``ESC [2J`` in a task's error
wiped the panes, and an ``ESC ]52;`` would have written the operator's clipboard (see
:mod:`relay_engine.contracts.printable`). Every line every widget draws passes through
:class:`ControlCharacters` (``RelayApp.get_line_filters``), whatever view or screen the text
came from, so no new screen can forget it.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from relay_engine.contracts.printable import printable_segments


class ControlCharacters(LineFilter):
    """Removes control characters from the text of a drawn line. They have no width, so
    the line keeps its layout; an escape sequence's printable rest (``[31m``) stays visible,
    as the harmless trace of what was there."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return printable_segments(segments)
