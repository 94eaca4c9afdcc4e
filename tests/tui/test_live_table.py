"""LiveTable repaints a changed row without re-rendering the rows that did not change."""

from __future__ import annotations

from typing import Any

from console_helpers import run_async, wait_until
from textual.app import App, ComposeResult

from relay_tui.widgets.live_table import LiveTable, Row


class Table(LiveTable):
    COLUMNS = (("name", "Name", 8), ("state", "State", 9), ("note", "Note", 10))


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Table()


def rows(count: int) -> list[Row]:
    return [(f"r{i}", (f"row{i}", "queued", "")) for i in range(count)]


def row_text(table: Table, index: int) -> str:
    """The line the table paints for the row at ``index`` (it must be in view)."""
    return table.render_line(1 + index - round(table.scroll_y)).text  # 1: the header


def count_renders(table: Table) -> list[int]:
    """Record the row index of every cell the table renders from now on."""
    rendered: list[int] = []
    render_cell = table._render_cell

    def counting(row_index: int, *args: Any, **kwargs: Any) -> Any:
        rendered.append(row_index)
        return render_cell(row_index, *args, **kwargs)

    table._render_cell = counting  # type: ignore[method-assign]
    return rendered


@run_async
async def test_a_changed_cell_repaints_only_its_row() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(Table)
        table.sync(rows(50), keep_order=True)
        await pilot.pause()
        assert "queued" in row_text(table, 3)
        rendered = count_renders(table)
        table.patch([("r3", ("row3", "running", "on p1"))])
        await wait_until(pilot, lambda: bool(rendered))
        await pilot.pause()
        assert set(rendered) == {3}
        assert "running" in row_text(table, 3) and "on p1" in row_text(table, 3)
        assert "queued" in row_text(table, 2) and "queued" in row_text(table, 4)
        assert "running" in app.export_screenshot()


@run_async
async def test_rows_changed_out_of_view_show_their_new_values_when_scrolled_to() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(Table)
        table.sync(rows(60), keep_order=True)
        await pilot.pause()
        changed = rows(61)
        changed[13] = ("r13", ("row13", "failed", "boom"))  # just below the view
        changed[40] = ("r40", ("row40", "parked", ""))  # far below it
        table.patch(changed[:60])
        await pilot.pause()
        table.sync(changed, keep_order=False)  # appends r60
        for index, text in ((13, "failed"), (40, "parked"), (60, "row60"), (2, "queued")):
            table.move_cursor(row=index, animate=False, scroll=True)
            await pilot.pause()
            assert text in row_text(table, index)
