"""The floor plan cannot drift: docs/architecture.md's module tables are what
scripts/architecture.py writes from the docstrings, and a docstring's purity claim holds.

Files are only read and parsed (the script uses ``ast``): nothing of relay is imported.
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts/architecture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


architecture = _load_script()


@pytest.fixture(scope="module")
def modules() -> dict:
    return architecture.read_modules(ROOT)


def test_the_module_tables_are_what_the_script_writes() -> None:
    page = (ROOT / architecture.PAGE).read_text(encoding="utf-8")
    wanted = architecture.render(page, ROOT)
    diff = "\n".join(
        list(difflib.unified_diff(page.splitlines(), wanted.splitlines(), lineterm=""))[:60]
    )
    assert page == wanted, (
        f"docs/architecture.md is stale (a module added, moved or its docstring changed): "
        f"run python scripts/architecture.py\n{diff}"
    )


def test_every_engine_module_has_a_docstring(modules: dict) -> None:
    assert [str(m.path) for m in architecture.undocumented(modules)] == []


def test_every_module_of_core_and_contracts_claims_purity(modules: dict) -> None:
    missing = [str(m.path) for m in architecture.unclaimed(modules)]
    assert missing == [], "give each a docstring line starting 'Pure' (docs/CONVENTIONS.md)"


def test_no_engine_module_claims_a_purity_its_imports_contradict(modules: dict) -> None:
    found = {str(m.path): bad for m, bad in architecture.contradicted(modules).items()}
    assert found == {}, "a module that claims Pure imports these (docs/CONVENTIONS.md)"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_purity_check_reads_imports_anywhere_and_follows_relative_ones(tmp_path: Path) -> None:
    """The rule itself, on a made-up tree: what contradicts a claim and what does not."""
    pure = '"""A module.\n\nPure: no I/O.\n"""\n'
    _write(
        tmp_path,
        {
            "relay_engine/core/ok.py": pure + "import json\nfrom relay_engine.core import other\n",
            "relay_engine/core/other.py": pure,
            "relay_engine/core/late.py": pure + "def f():\n    import subprocess\n",
            "relay_engine/core/uses_store.py": pure + "from relay_engine.store.db import Store\n",
            "relay_engine/store/db.py": '"""The database."""\nimport sqlalchemy\n',
            "relay_engine/agents/parsers/__init__.py": pure,
            "relay_engine/agents/parsers/base.py": pure + "import re\n",
            "relay_engine/agents/parsers/one.py": pure + "from .base import re\n",
            "relay_engine/agents/parsers/two.py": pure + "from ..runner import run\n",
            "relay_engine/agents/runner.py": '"""Processes."""\nimport subprocess\n',
            "relay_engine/contracts/plain.py": '"""No claim."""\n',
        },
    )
    modules = architecture.read_modules(tmp_path)
    found = {m.name: bad for m, bad in architecture.contradicted(modules).items()}
    assert found == {
        "relay_engine.core.late": ["subprocess"],
        "relay_engine.core.uses_store": ["relay_engine.store.db"],
        "relay_engine.agents.parsers.two": ["relay_engine.agents.runner"],
    }
    assert [m.name for m in architecture.unclaimed(modules)] == ["relay_engine.contracts.plain"]


def test_test_file_basenames_are_unique_across_the_tiers() -> None:
    """pytest's default import mode imports a test file by its basename: a second
    test_x.py in another tier would break the whole run, not just its own tier."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in (ROOT / "tests").rglob("test_*.py"):
        if "node_modules" not in path.parts:
            seen[path.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
