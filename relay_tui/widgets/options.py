"""An OptionList whose page moves survive a list that is not laid out yet.

``OptionList._move_page`` indexes a line cache that is filled only while the list has a
content region; a PageDown that reaches a list hidden, resized or just rebuilt raised
``KeyError`` and ended the console (see :class:`relay_tui.actions.palette.SafePalette`).
"""

from __future__ import annotations

from typing import Literal

from textual.widgets import OptionList


class SafeOptionList(OptionList):
    def _move_page(self, direction: Literal[-1, 1]) -> None:
        if self.option_count and (self.highlighted or 0) not in self._index_to_line:
            self.action_first() if direction < 0 else self.action_last()
            return
        super()._move_page(direction)
