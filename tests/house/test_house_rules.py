"""The house rules of docs/CONVENTIONS.md, enforced: ruff, ruff format, import-linter, mypy,
and no function in relay_engine/ or relay_tui/ over MAX_FUNCTION_LINES."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("relay_engine", "relay_tui")
MAX_FUNCTION_LINES = 60

LONG_FUNCTIONS: dict[str, tuple[int, str]] = {}
"""``path::qualified.name`` -> (the most lines it may have, why it is not split yet). Each
entry is a ceiling: the function may shrink, never grow; one that fits under
MAX_FUNCTION_LINES again must leave the list."""


def _tool(name: str) -> str:
    """The tool installed next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def _passes(*argv: str, timeout: float = 300) -> None:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [_tool(argv[0]), *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"`{' '.join(argv)}` failed (exit {done.returncode}):\n{done.stdout}{done.stderr}",
            pytrace=False,
        )


def test_ruff_check() -> None:
    _passes("ruff", "check", ".")


def test_ruff_format() -> None:
    _passes("ruff", "format", "--check", ".")


def test_import_contracts() -> None:
    _passes("lint-imports")


def test_mypy() -> None:
    _passes("mypy")


def function_lengths(root: Path = ROOT) -> Iterator[tuple[str, int, str, int]]:
    """(path, line of the ``def``, qualified name, lines from ``def`` to its end) of every
    function and method, nested ones included; decorators do not count."""
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
            for name, node in _named_functions(tree):
                assert node.end_lineno is not None
                yield relative, node.lineno, name, node.end_lineno - node.lineno + 1


def _named_functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}{child.name}", child
            yield from _named_functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _named_functions(child, f"{prefix}{child.name}.")
        else:
            yield from _named_functions(child, prefix)


def test_no_function_is_too_long() -> None:
    offenders = []
    seen: dict[str, int] = {}
    for path, line, name, length in function_lengths():
        key = f"{path}::{name}"
        seen[key] = max(length, seen.get(key, 0))
        ceiling = LONG_FUNCTIONS[key][0] if key in LONG_FUNCTIONS else MAX_FUNCTION_LINES
        if length > ceiling:
            offenders.append(f"{path}:{line} {name} ({length} lines)")
    stale = [
        f"{key} ({seen[key]} lines)" if key in seen else f"{key} (gone)"
        for key in LONG_FUNCTIONS
        if seen.get(key, 0) <= MAX_FUNCTION_LINES
    ]
    problems = []
    if offenders:
        problems.append(
            f"functions over {MAX_FUNCTION_LINES} lines (or over their LONG_FUNCTIONS ceiling): "
            "extract well-named helpers\n  " + "\n  ".join(offenders)
        )
    if stale:
        problems.append(
            f"LONG_FUNCTIONS entries that fit in {MAX_FUNCTION_LINES} lines now: remove them\n  "
            + "\n  ".join(stale)
        )
    assert not problems, "\n".join(problems)


MARKUP_READERS = frozenset({"Static", "Label", "Option", "update"})
"""Textual calls that read a plain string as markup (as does setting a border title)."""


def _markup_risks(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                name = getattr(target, "attr", "")
                if name in ("border_title", "border_subtitle") and not _plain(node.value):
                    yield node.lineno, f"{name} = a string that is not Text(...)"
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.JoinedStr):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in MARKUP_READERS:
                yield node.lineno, f"{name}(f-string)"


def _plain(value: ast.expr) -> bool:
    """A fixed string, None, or text wrapped in ``Text`` (never read as markup)."""
    if isinstance(value, ast.Constant):
        return True
    return isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Text"


def test_the_console_never_reads_built_strings_as_markup() -> None:
    """A border title, ``Static``, ``Label``, ``Option`` or ``update`` given a string reads
    it as markup: a task's error, an agent's ask, a CLI's fix or a filter the operator
    typed, holding ``[/usr/bin/x]``, ended the console. Built text goes in ``Text``."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for path in sorted((ROOT / "relay_tui").rglob("*.py"))
        for line, what in _markup_risks(ast.parse(path.read_text(), str(path)))
    ]
    assert not offenders, "wrap built strings in rich.text.Text:\n  " + "\n  ".join(offenders)
