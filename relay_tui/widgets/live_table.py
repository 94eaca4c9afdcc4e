"""A DataTable that is patched in place from row data instead of being rebuilt."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.text import Text
from textual.events import Resize, Show
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist

Row = tuple[str, Sequence[Any]]
LazyRow = tuple[str, Callable[[], Sequence[Any]]]
OFFSCREEN_MARGIN = 4
"""Rows just outside the viewport are kept current too, so a small scroll shows no lag."""


def cell(value: Any) -> Text:
    """One line, clipped to the column with an ellipsis (and never parsed as markup)."""
    text = value if isinstance(value, Text) else Text(str(value))
    text.no_wrap = True
    text.overflow = "ellipsis"
    text.end = ""
    return text


def same(before: Any, after: Any) -> bool:
    """Text equality ignores the base style; a cell whose colour changed must be written."""
    if isinstance(before, Text) and isinstance(after, Text):
        return (before.plain, before.style, before.spans) == (after.plain, after.style, after.spans)
    return bool(before == after)


class LiveTable(DataTable[Any]):
    """Rows are addressed by string keys; ``sync`` and ``patch`` touch only changed cells.

    Rows patched while off-screen are written to the DataTable when they scroll into view:
    every write invalidates the table's render caches, so 5,000 rows changing out of sight
    must not cost a repaint each.
    """

    COLUMNS: Sequence[tuple[str, str, int]] = ()
    """(column key, label, width): fixed widths, so 5,000 rows are never measured. The last
    column is flexible: its width is a minimum and it takes whatever the pane has left."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", False)
        super().__init__(**kwargs)
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._shown: dict[str, tuple[Any, ...]] = {}
        self._stale: set[str] = set()
        self._pending: dict[str, Callable[[], Sequence[Any]]] = {}
        self._order: list[str] = []
        self.rebuilds = 0

    def on_mount(self) -> None:
        for key, label, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)

    # -- geometry ---------------------------------------------------------------------
    def on_resize(self, _event: Resize) -> None:
        self.fit_flexible_column()
        self.flush_visible()

    def on_show(self, _event: Show) -> None:
        self.fit_flexible_column()
        self.flush_visible()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.flush_visible()

    def fit_flexible_column(self) -> None:
        """Give the last column the width the fixed columns (and cell padding) leave."""
        if not self.COLUMNS or not self.is_mounted:
            return
        *fixed, (key, _label, minimum) = self.COLUMNS
        used = sum(width for _k, _l, width in fixed) + 2 * self.cell_padding * len(self.COLUMNS)
        available = self.scrollable_content_region.width - used
        self._set_column_width(key, max(minimum, available))

    def _set_column_width(self, key: str, width: int) -> None:
        column = self.columns.get(ColumnKey(key))
        if column is None or column.width == width:
            return
        column.width = width
        # DataTable has no public resize: its render caches and virtual size assume old widths.
        self._clear_caches()
        self._require_update_dimensions = True
        self.refresh()

    def _visible(self, key: str) -> bool:
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        top = int(self.scroll_y) - OFFSCREEN_MARGIN
        return top <= index <= top + self.size.height + 2 * OFFSCREEN_MARGIN

    # -- rows -------------------------------------------------------------------------
    @property
    def row_keys(self) -> list[str]:
        return list(self._order)

    @property
    def cursor_key(self) -> str | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    def patch_lazily(self, rows: Iterable[LazyRow]) -> None:
        """Like ``patch``, but an off-screen row's values are only made once it is in view."""
        for row_key, make in rows:
            if row_key not in self._cells:
                continue
            if self._visible(row_key):
                self.patch([(row_key, make())])
            else:
                self._pending[row_key] = make

    def patch(self, rows: Iterable[Row]) -> int:
        """Update rows that exist; visible ones now, others when they scroll into view.

        Returns the number of cells written to the screen.
        """
        written = 0
        for row_key, values in rows:
            old = self._cells.get(row_key)
            if old is None:
                continue
            self._pending.pop(row_key, None)
            new = tuple(cell(value) for value in values)
            if all(same(a, b) for a, b in zip(old, new, strict=True)):
                continue
            self._cells[row_key] = new
            if self._visible(row_key):
                written += self._write(row_key)
            else:
                self._stale.add(row_key)
        return written

    def flush_visible(self) -> None:
        """Write the rows that were patched off-screen and are now in view."""
        for key in [k for k in self._pending if self._visible(k)]:
            self.patch([(key, self._pending.pop(key)())])
        for key in [k for k in self._stale if self._visible(k)]:
            self._write(key)

    def _write(self, row_key: str) -> int:
        self._stale.discard(row_key)
        shown, new = self._shown.get(row_key, ()), self._cells[row_key]
        written = 0
        for index, (column, _label, _width) in enumerate(self.COLUMNS):
            if index < len(shown) and same(shown[index], new[index]):
                continue
            try:
                self.update_cell(row_key, column, new[index])
            except CellDoesNotExist:
                continue
            written += 1
        self._shown[row_key] = new
        return written

    def sync(self, rows: Sequence[Row], *, keep_order: bool) -> None:
        """Make the table show ``rows``: append/remove/patch, or rebuild if order matters."""
        new_keys = [key for key, _ in rows]
        if keep_order and new_keys != self._order:
            self.rebuild(rows)
            return
        wanted = set(new_keys)
        for key in [k for k in self._order if k not in wanted]:
            self._remove(key)
        self.patch(rows)
        for key, values in rows:
            if key not in self._cells:
                self._add(key, values)

    def rebuild(self, rows: Sequence[Row]) -> None:
        """Replace every row, keeping the cursor on the same row key where it still exists."""
        selected = self.cursor_key
        self.rebuilds += 1
        self.clear()
        self._cells, self._shown, self._stale, self._order = {}, {}, set(), []
        self._pending = {}
        for key, values in rows:
            self._add(key, values)
        self.select_key(selected)

    def _add(self, key: str, values: Sequence[Any]) -> None:
        row = tuple(cell(value) for value in values)
        self.add_row(*row, key=key)
        self._cells[key] = self._shown[key] = row
        self._order.append(key)

    def select_key(self, key: str | None) -> None:
        if key is None or key not in self._cells:
            return
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return
        self.move_cursor(row=index, animate=False, scroll=True)

    def _remove(self, key: str) -> None:
        self._cells.pop(key, None)
        self._shown.pop(key, None)
        self._stale.discard(key)
        self._pending.pop(key, None)
        self._order.remove(key)
        with contextlib.suppress(RowDoesNotExist):
            self.remove_row(key)
