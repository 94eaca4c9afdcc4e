"""A job's dependency graph drawn with box characters: layered by wave, edges, critical path.

Pure: tasks in, lines of Rich Text out. The layout is the classic layered one (Sugiyama):
each wave is a column, an edge that skips waves passes through placeholder rows, rows in
a column are ordered by the barycentre of their neighbours to untangle edges. Every source
gets a vertical track of its own in the gutter after its column, and columns alternate
between even and odd rows, so a line leaving a task never runs along a line entering another:
two lines meet only where one connects to the other or where they plainly cross (┼).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from relay_tui.render.styles import GLYPHS

STORY_SECONDS = {"S": 900.0, "M": 1800.0, "L": 3600.0, "XL": 7200.0}
LABEL_CAP = 24
MAX_NODES = 400
SWEEPS = 4
UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
LIGHT = {
    LEFT | RIGHT: "─", UP | DOWN: "│", DOWN | RIGHT: "┌", DOWN | LEFT: "┐",
    UP | RIGHT: "└", UP | LEFT: "┘", UP | DOWN | RIGHT: "├", UP | DOWN | LEFT: "┤",
    DOWN | LEFT | RIGHT: "┬", UP | LEFT | RIGHT: "┴", UP | DOWN | LEFT | RIGHT: "┼",
    LEFT: "─", RIGHT: "─", UP: "│", DOWN: "│",
}  # fmt: skip
HEAVY = {
    LEFT | RIGHT: "━", UP | DOWN: "┃", DOWN | RIGHT: "┏", DOWN | LEFT: "┓",
    UP | RIGHT: "┗", UP | LEFT: "┛", UP | DOWN | RIGHT: "┣", UP | DOWN | LEFT: "┫",
    DOWN | LEFT | RIGHT: "┳", UP | LEFT | RIGHT: "┻", UP | DOWN | LEFT | RIGHT: "╋",
    LEFT: "━", RIGHT: "━", UP: "┃", DOWN: "┃",
}  # fmt: skip


@dataclass(frozen=True)
class GraphNode:
    id: str
    label: str
    state: str
    wave: int
    dependencies: tuple[str, ...]
    seconds: float
    """Actual run time when known, else the story size's estimate: the critical path's weight."""


def node_seconds(
    story_size: str, started: float | None, finished: float | None, now: float
) -> float:
    if started is not None:
        return max(1.0, (finished or now) - started)
    return STORY_SECONDS.get(story_size, STORY_SECONDS["M"])


def assign_layers(nodes: Sequence[GraphNode]) -> dict[str, int]:
    """Column per wave; a dependency in the same or a later wave pushes its dependent right."""
    waves = sorted({n.wave for n in nodes})
    layer = {n.id: waves.index(n.wave) for n in nodes}
    known = {n.id for n in nodes}
    for _ in range(len(nodes)):  # relax until stable (cycles stop at len(nodes) passes)
        moved = False
        for node in nodes:
            for dep in node.dependencies:
                if dep in known and layer[node.id] <= layer[dep]:
                    layer[node.id] = layer[dep] + 1
                    moved = True
        if not moved:
            break
    return layer


def critical_path(nodes: Sequence[GraphNode]) -> list[str]:
    """The chain of dependencies with the most run time (estimates for unfinished tasks)."""
    by_id = {n.id: n for n in nodes}
    best: dict[str, tuple[float, str | None]] = {}

    def longest(node_id: str, seen: frozenset[str]) -> float:
        if node_id in best:
            return best[node_id][0]
        node = by_id[node_id]
        deps = [d for d in node.dependencies if d in by_id and d not in seen]
        options = [(longest(d, seen | {node_id}), d) for d in deps]
        before, via = max(options, default=(0.0, None))
        best[node_id] = (before + node.seconds, via)
        return best[node_id][0]

    if not nodes:
        return []
    end = max(nodes, key=lambda n: (longest(n.id, frozenset()), n.id)).id
    path: list[str] = []
    current: str | None = end
    while current is not None and current not in path:
        path.append(current)
        current = best[current][1]
    return path[::-1]


@dataclass
class _Item:
    key: str  # a task id, or "~src>dst@layer" for a placeholder on a long edge
    layer: int
    real: bool


def _build_items(
    nodes: Sequence[GraphNode], layer: Mapping[str, int]
) -> tuple[list[list[_Item]], list[tuple[str, str]]]:
    """Columns of items (tasks and placeholders) and the edges between adjacent columns."""
    columns: list[list[_Item]] = [[] for _ in range(max(layer.values()) + 1)]
    for node in nodes:
        columns[layer[node.id]].append(_Item(node.id, layer[node.id], True))
    edges: list[tuple[str, str]] = []
    for node in nodes:
        for dep in node.dependencies:
            if dep not in layer:
                continue
            previous = dep
            for step in range(layer[dep] + 1, layer[node.id]):
                key = f"~{dep}>{node.id}@{step}"
                columns[step].append(_Item(key, step, False))
                edges.append((previous, key))
                previous = key
            edges.append((previous, node.id))
    return columns, edges


def _order(columns: list[list[_Item]], edges: list[tuple[str, str]]) -> None:
    """Barycentre sweeps: each item moves toward the mean position of its neighbours."""
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for src, dst in edges:
        preds.setdefault(dst, []).append(src)
        succs.setdefault(src, []).append(dst)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        sequence = range(1, len(columns)) if down else range(len(columns) - 2, -1, -1)
        for index in sequence:
            neighbour = columns[index - 1] if down else columns[index + 1]
            _sort_toward(columns[index], neighbour, preds if down else succs)


def _sort_toward(column: list[_Item], neighbour: list[_Item], links: dict[str, list[str]]) -> None:
    """One column of a sweep, ordered by where its items' links sit in the neighbour."""
    position = {item.key: i for i, item in enumerate(neighbour)}
    centre: dict[str, float] = {}
    for i, item in enumerate(column):
        near = [position[k] for k in links.get(item.key, ()) if k in position]
        centre[item.key] = sum(near) / len(near) if near else float(i)
    column.sort(key=lambda item: centre[item.key])


class _Canvas:
    def __init__(self) -> None:
        self.bits: dict[tuple[int, int], int] = {}
        self.heavy: set[tuple[int, int]] = set()

    def mark(self, x: int, y: int, bits: int, heavy: bool) -> None:
        self.bits[(x, y)] = self.bits.get((x, y), 0) | bits
        if heavy:
            self.heavy.add((x, y))

    def hline(self, x1: int, x2: int, y: int, heavy: bool) -> None:
        for x in range(x1, x2 + 1):
            self.mark(x, y, (LEFT if x > x1 else 0) | (RIGHT if x < x2 else 0) or RIGHT, heavy)

    def vline(self, x: int, y1: int, y2: int, heavy: bool) -> None:
        top, bottom = min(y1, y2), max(y1, y2)
        for y in range(top, bottom + 1):
            self.mark(x, y, (UP if y > top else 0) | (DOWN if y < bottom else 0), heavy)


def render_graph(
    nodes: Sequence[GraphNode], styles: Mapping[str, str], *, critical_style: str = "bold"
) -> list[Text]:
    """The graph as lines of text; a legend line names the critical path."""
    if not nodes:
        return [Text("No tasks yet.", style="dim")]
    if len(nodes) > MAX_NODES:
        return [Text(f"{len(nodes)} tasks: too many to draw; see the waves in the main screen.")]
    layer = assign_layers(nodes)
    columns, edges = _build_items(nodes, layer)
    _order(columns, edges)
    path = critical_path(nodes)
    critical_nodes = set(path)
    by_id = {n.id: n for n in nodes}
    labels = {n.id: _label(n) for n in nodes}
    widths = [max((len(labels[i.key]) for i in col if i.real), default=3) for col in columns]
    row = {i.key: (c % 2) + 2 * r for c, col in enumerate(columns) for r, i in enumerate(col)}
    sources = [_sources(col, edges) for col in columns]
    x0, x = [], 0
    for c in range(len(columns)):
        x0.append(x)
        x += widths[c] + 2 * len(sources[c]) + 3
    canvas = _Canvas()
    place = {i.key: (c, i) for c, col in enumerate(columns) for i in col}
    for src, dst in edges:
        c, item = place[src]
        heavy = _on_path(src, dst, path)
        start = x0[c] + (len(labels[src]) if item.real else 0)
        track = x0[c] + widths[c] + 1 + 2 * sources[c].index(src)
        end = x0[c + 1] - 1
        canvas.hline(start, track, row[src], heavy)
        canvas.vline(track, row[src], row[dst], heavy)
        canvas.hline(track, end, row[dst], heavy)
    for c, col in enumerate(columns):
        for item in col:
            if not item.real:
                heavy = any(_on_path(s, d, path) for s, d in edges if d == item.key)
                canvas.hline(x0[c], x0[c] + widths[c], row[item.key], heavy)
    lines = _paint(canvas, x, max(row.values()) + 1, critical_style)
    for c, col in enumerate(columns):
        for item in (i for i in col if i.real):
            node = by_id[item.key]
            style = styles.get(node.state, "")
            if item.key in critical_nodes:
                style = f"{style} {critical_style}".strip()
            lines[row[item.key]] = _overlay(lines[row[item.key]], x0[c], labels[item.key], style)
    legend = Text("━ critical path: " + " → ".join(path), style="dim", end="")
    for line in lines:
        line.rstrip()  # in place
    return [*lines, Text(""), legend]


def _label(node: GraphNode) -> str:
    name = node.label if len(node.label) <= LABEL_CAP else node.label[: LABEL_CAP - 1] + "…"
    return f"{GLYPHS.get(node.state, '?')} {name}"


def _sources(column: list[_Item], edges: list[tuple[str, str]]) -> list[str]:
    keys = {src for src, _dst in edges}
    return [item.key for item in column if item.key in keys]


def _ends(key: str) -> tuple[str, str]:
    """A task's own id twice; for a placeholder "~dep>task@layer", the edge's two tasks."""
    if not key.startswith("~"):
        return key, key
    dep, _, rest = key[1:].partition(">")
    return dep, rest.rpartition("@")[0]


def _on_path(src: str, dst: str, path: list[str]) -> bool:
    """Whether the edge (or the placeholder chain it belongs to) joins consecutive path tasks."""
    pair = (_ends(src)[0], _ends(dst)[1])
    return any(pair == step for step in itertools.pairwise(path))


def _paint(canvas: _Canvas, width: int, height: int, critical: str) -> list[Text]:
    """Each line in runs of one style (a Text append per cell would be slow at 400 tasks)."""
    lines = []
    for y in range(height):
        line = Text(end="", no_wrap=True)
        run: list[str] = []
        run_style = ""
        for x in range(width):
            bits = canvas.bits.get((x, y), 0)
            heavy = (x, y) in canvas.heavy
            char = " " if not bits else (HEAVY if heavy else LIGHT)[bits]
            style = "" if not bits else (critical if heavy else "dim")
            if style != run_style and run:
                line.append("".join(run), style=run_style)
                run = []
            run_style = style
            run.append(char)
        line.append("".join(run), style=run_style)
        lines.append(line)
    return lines


def _overlay(line: Text, x: int, label: str, style: str) -> Text:
    before = line[:x]
    after = line[x + len(label) :]
    result = Text(end="", no_wrap=True)
    result.append_text(before)
    result.append(label, style=style)
    result.append_text(after)
    return result
