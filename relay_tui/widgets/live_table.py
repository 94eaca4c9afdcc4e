"""The base of every live table: a DataTable patched in place from row data instead of being
rebuilt, and the sortable kind ``s`` cycles."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.events import Resize, Show
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

Row = tuple[str, Sequence[Any]]
LazyRow = tuple[str, Callable[[], Sequence[Any] | None]]
NOTE_CHARS = 200  # a note is one line; the table clips it to its column with an ellipsis
OFFSCREEN_MARGIN = 4
BOTTOM_SNAP = 6
"""A cursor this close to a table's bottom edge (a preview's most lines) goes back to it
when the table's height changes."""
"""Rows just outside the viewport are kept current too, so a small scroll shows no lag."""
ROW_CACHES = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
"""DataTable's render caches that hold a row's content (the others hold order and heights)."""
KNOWN_CACHES = {*ROW_CACHES, "_offset_cache", "_ordered_row_cache"}
KNOWN_CACHES |= {"_box_model_cache", "_query_one_cache"}  # Widget's, not DataTable's
IN_PLACE_INTERNALS = (
    "_update_count",
    "_data",
    "_row_locations",
    "_column_locations",
    "_get_offsets",
)


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


_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def _discard_where(cache: LRUCache[_Key, _Value], drop: Callable[[_Key], bool]) -> None:
    for cache_key in [k for k in cache.keys() if drop(k)]:  # noqa: SIM118 - no __iter__
        cache.discard(cache_key)


class LiveTable(DataTable[Any]):
    """Rows are addressed by string keys; ``sync`` and ``patch`` touch only changed cells.

    Rows patched while off-screen are written to the DataTable when they scroll into view:
    every write invalidates the table's render caches, so 5,000 rows changing out of sight
    must not cost a repaint each.
    """

    BINDINGS = [
        Binding("j", "cursor_down", "Down", id="row-down", show=False),
        Binding("k", "cursor_up", "Up", id="row-up", show=False),
        Binding("home", "scroll_top", "First row", id="row-first", show=False),
        Binding("end,G", "scroll_bottom", "Last row", id="row-last", show=False),
    ]
    COLUMNS: Sequence[tuple[str, str, int]] = ()
    """(column key, label, width): fixed widths, so 5,000 rows are never measured."""
    FLEX: ClassVar[Mapping[str, int]] = {}
    """Column key -> weight: these columns' widths are minimums, and they share whatever
    width the pane has left in proportion to their weights (the last column if empty)."""
    OPTIONAL: ClassVar[Mapping[str, int]] = {}
    """Column key -> the table width from which it is shown: narrow panes give the room of
    the columns that matter less to the ones that matter more."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", False)
        super().__init__(**kwargs)
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._shown: dict[str, tuple[Any, ...]] = {}
        self._stale: set[str] = set()
        self._pending: dict[str, Callable[[], Sequence[Any] | None]] = {}
        self._order: list[str] = []
        self.rebuilds = 0
        self._dirty_rows: set[RowKey] = set()
        self._in_place = self._can_update_in_place()
        self._columns_shown: tuple[str, ...] = ()

    # -- in-place cell updates ----------------------------------------------------------
    def _can_update_in_place(self) -> bool:
        """Whether this Textual's DataTable has the internals ``update_cell`` relies on."""
        caches = {name for name, value in vars(self).items() if isinstance(value, LRUCache)}
        return (
            all(hasattr(self, name) for name in IN_PLACE_INTERNALS)
            and caches == KNOWN_CACHES
            and all(hasattr(getattr(self, name), "keys") for name in ROW_CACHES)
        )

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Any,
        *,
        update_width: bool = False,
    ) -> None:
        """Change one cell and repaint only its row, not the whole visible table.

        DataTable.update_cell bumps ``_update_count``, which is part of every render cache
        key, so one changed cell re-renders every visible cell (tens of ms with 40 rows in
        view, and a key press waits behind it). Columns here have fixed widths and rows a
        fixed order and height, so a cell's content affects only its own row. This writes
        ``_data`` directly, leaves ``_update_count`` alone, repaints the row's region
        (``refresh_row``) and remembers the row; before the next ``render_line``,
        ``_evict_dirty_rows`` drops the entries of the caches in ``ROW_CACHES`` that belong
        to it: keyed by row key (``_cell_render_cache``, ``_row_render_cache``), by row
        index (``_row_renderable_cache``, key[1]) or by table line (``_line_cache``, key[0],
        mapped to a row by ``_get_offsets``). ``_offset_cache`` and ``_ordered_row_cache``
        hold only order and heights, which do not change. Everything else (adding,
        removing, sorting, resizing, widths) still bumps the count. If these internals are
        missing, or a DataTable cache this does not know about appears, the stock method
        runs instead.
        """
        key = RowKey(row_key) if isinstance(row_key, str) else row_key
        row = self.rows.get(key)
        if not self._in_place or update_width or row is None or row.auto_height:
            super().update_cell(row_key, column_key, value, update_width=update_width)
            return
        column = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        if column not in self._column_locations:
            raise CellDoesNotExist(f"No cell exists for row_key={key!r}, column_key={column!r}.")
        self._data[key][column] = value
        self._dirty_rows.add(key)
        index = self._row_locations.get(key)
        if index is not None:  # it is: the row was found above
            self.refresh_row(index)

    def _evict_dirty_rows(self) -> None:
        """Drop the cached renders of rows whose cells changed (see ``update_cell``)."""
        rows, self._dirty_rows = self._dirty_rows, set()
        indexes = {self._row_locations.get(key) for key in rows}
        _discard_where(self._cell_render_cache, lambda k: k[0] in rows)
        _discard_where(self._row_render_cache, lambda k: k[0] in rows)
        _discard_where(self._row_renderable_cache, lambda k: k[1] in indexes)
        _discard_where(self._line_cache, lambda k: self._line_row(k[0]) in rows)

    def _line_row(self, y: int) -> RowKey | None:
        try:
            return self._get_offsets(y)[0]
        except (LookupError, IndexError):
            return None

    def render_line(self, y: int) -> Strip:
        if self._dirty_rows:
            self._evict_dirty_rows()
        return super().render_line(y)

    def on_mount(self) -> None:
        self._columns_shown = self.shown_columns()
        for key, label, width in self.COLUMNS:
            if key in self._columns_shown:
                self.add_column(label, key=key, width=width)

    # -- geometry ---------------------------------------------------------------------
    def on_resize(self, _event: Resize) -> None:
        """Fit now, and again once the layout settled: leaving a maximized view resizes the
        table while its content region can still report the maximized width (the columns
        stayed maximized until the next resize)."""
        self.fit_columns()
        self.call_after_refresh(self.fit_columns)
        self.call_after_refresh(self._cursor_into_view)

    def _cursor_into_view(self) -> None:
        """A table whose height changed (its preview took a line more, or less) keeps its
        cursor row in view: hidden above, it becomes the first line; near the bottom or
        hidden below, the last. Where it lands depends on the row and the new height only,
        not on how many lines the previews of the rows passed on the way took."""
        if not (self.is_mounted and self.show_cursor and self.row_count):
            return
        visible = self.scrollable_content_region.height - (
            self.header_height if self.show_header else 0
        )
        if visible <= 0:
            return
        row, top = self.cursor_row, round(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + visible - BOTTOM_SNAP:
            self.scroll_to(y=max(0, row - visible + 1), animate=False, immediate=True)

    def on_show(self, _event: Show) -> None:
        self.fit_columns()

    def fit_columns(self) -> None:
        """The columns this width shows, their widths, and the rows now in view."""
        if self.is_mounted and self.shown_columns() != self._columns_shown:
            self._reset_columns()
        self.fit_flexible_column()
        self.flush_visible()

    def shown_columns(self) -> tuple[str, ...]:
        width = self.scrollable_content_region.width if self.is_mounted else 0
        return tuple(
            key
            for key, _label, _width in self.COLUMNS
            if key not in self.OPTIONAL or (width and width >= self.OPTIONAL[key])
        )

    def _reset_columns(self) -> None:
        """Add the columns a new width shows (or drop those it hides) and rows again."""
        selected = self.cursor_key
        self._columns_shown = self.shown_columns()
        self.clear(columns=True)
        for key, label, width in self.COLUMNS:
            if key in self._columns_shown:
                self.add_column(label, key=key, width=width)
        for key in self._order:
            self._pending.pop(key, None)
            self.add_row(*self._visible_values(self._cells[key]), key=key)
            self._shown[key] = self._cells[key]
        self._stale.clear()
        self.select_key(selected)

    def _visible_values(self, values: Sequence[Any]) -> list[Any]:
        shown = self._columns_shown
        return [v for (key, _l, _w), v in zip(self.COLUMNS, values, strict=True) if key in shown]

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.flush_visible()

    def fit_flexible_column(self) -> None:
        """Share the width the fixed columns (and cell padding) leave among the flexible ones."""
        if not self.COLUMNS or not self.is_mounted:
            return
        columns = [c for c in self.COLUMNS if c[0] in self._columns_shown]
        flex = {k: w for k, w in self.FLEX.items() if k in self._columns_shown}
        flex = flex or {columns[-1][0]: 1}
        used = sum(width for _k, _l, width in columns) + 2 * self.cell_padding * len(columns)
        spare = max(0, self.scrollable_content_region.width - used)
        total = sum(flex.values())
        given = 0
        flexible = [(key, width) for key, _label, width in columns if key in flex]
        for index, (key, minimum) in enumerate(flexible):
            share = spare - given if index == len(flexible) - 1 else spare * flex[key] // total
            given += share
            self._set_column_width(key, minimum + share)

    def _set_column_width(self, key: str, width: int) -> None:
        column = self.columns.get(ColumnKey(key))
        if column is None or column.width == width:
            return
        column.width = width
        # DataTable has no public resize: its render caches and virtual size assume old widths.
        self._clear_caches()
        self._require_update_dimensions = True
        self.refresh()

    def _window(self) -> tuple[int, int]:
        """Row indexes kept current: the viewport and a margin (read once per batch: the
        widget's size walks the DOM, which costs at 5,000 rows)."""
        top = int(self.scroll_y) - OFFSCREEN_MARGIN
        return top, top + self.size.height + 2 * OFFSCREEN_MARGIN

    def _visible(self, key: str, window: tuple[int, int] | None = None) -> bool:
        index = self._row_locations.get(RowKey(key)) if self._in_place else None
        if index is None:
            try:
                index = self.get_row_index(key)
            except RowDoesNotExist:
                return False
        top, bottom = window or self._window()
        return top <= index <= bottom

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
        window = self._window()
        for row_key, make in rows:
            if row_key not in self._cells:
                continue
            if self._visible(row_key, window):
                self.patch(self._made(row_key, make), window)
            else:
                self._pending[row_key] = make

    def _made(self, row_key: str, make: Callable[[], Sequence[Any] | None]) -> list[Row]:
        """The row ``make`` gives, if any: a row gone from the data since gives none."""
        self._pending.pop(row_key, None)
        values = make()
        return [] if values is None else [(row_key, values)]

    def patch(self, rows: Iterable[Row], window: tuple[int, int] | None = None) -> int:
        """Update rows that exist; visible ones now, others when they scroll into view.

        Returns the number of cells written to the screen.
        """
        window = window or self._window()
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
            if self._visible(row_key, window):
                written += self._write(row_key)
            else:
                self._stale.add(row_key)
        return written

    def flush_visible(self) -> None:
        """Write the rows that were patched off-screen and are now in view."""
        window = self._window()
        for key in [k for k in self._pending if self._visible(k, window)]:
            self.patch(self._made(key, self._pending[key]), window)
        for key in [k for k in self._stale if self._visible(k, window)]:
            self._write(key)

    def _write(self, row_key: str) -> int:
        self._stale.discard(row_key)
        shown, new = self._shown.get(row_key, ()), self._cells[row_key]
        written = 0
        for index, (column, _label, _width) in enumerate(self.COLUMNS):
            if column not in self._columns_shown:
                continue
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
        selected = self.cursor_key
        removed = [k for k in self._order if k not in wanted]
        for key in removed:
            self._remove(key)
        self.patch(rows)
        for key, values in rows:
            if key not in self._cells:
                self._add(key, values)
        if removed and selected in self._cells:
            self.select_key(selected)  # rows vanished above it: the cursor stays on its row

    def rebuild(self, rows: Sequence[Row]) -> None:
        """Replace every row, keeping the cursor on the same row key where it still exists,
        at the same line of the pane: rows appearing above it must not scroll the view."""
        selected = self.cursor_key
        offset = self.cursor_row - round(self.scroll_y)
        self.rebuilds += 1
        self.clear()
        self._cells, self._shown, self._stale, self._order = {}, {}, set(), []
        self._pending = {}
        for key, values in rows:
            self._add(key, values)
        if selected not in self._cells:
            return
        index = self._order.index(selected)
        # Rows here are one line each: the height is known before DataTable measures them
        # on idle, so the view can be put back now instead of a frame later.
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(self.virtual_size.width, len(self._order) + header)
        self.scroll_to(y=max(0, index - offset), animate=False, immediate=True)
        self.move_cursor(row=index, animate=False, scroll=False)

    def _add(self, key: str, values: Sequence[Any]) -> None:
        row = tuple(cell(value) for value in values)
        self.add_row(*self._visible_values(row), key=key)
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


class SortableTable(LiveTable):
    """A live table whose row order the operator cycles with ``s``."""

    SORTS: ClassVar[tuple[str, ...]] = ("default",)
    sort_index = 0

    @property
    def current_sort(self) -> str:
        return self.SORTS[self.sort_index % len(self.SORTS)]

    def cycle_sort(self) -> str:
        self.sort_index = (self.sort_index + 1) % len(self.SORTS)
        return self.current_sort
