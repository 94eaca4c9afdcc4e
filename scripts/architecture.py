"""Write the module tables of docs/architecture.md from the modules' own docstrings.

    python scripts/architecture.py          # rewrite the tables between their markers
    python scripts/architecture.py --check  # exit 1 when the page is not what it would write

Each table lists a package's modules (``relay_engine`` layer by layer, in the order of the
import-linter layers contract in pyproject.toml, then ``relay_tui``): the module, the first
sentence of its docstring, and whether it is pure. A module claims purity with a docstring
line starting ``Pure`` (docs/CONVENTIONS.md); the claim is shown only when its imports bear
it out, and the contradictions are listed. The hand-written prose around the markers is left
alone. Files are only read and parsed (``ast``), never imported: the script and
tests/unit/test_architecture.py need neither relay nor its dependencies.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = Path("docs/architecture.md")
PACKAGES = ("relay_engine", "relay_tui")

# What a pure module may not import: a database, processes, git, sockets, threads ...
IMPURE_LIBRARIES = frozenset(
    {"sqlalchemy", "sqlmodel", "subprocess", "git", "psutil", "socket", "threading"}
)
# ... nor the engine layers that use them, except a module there that claims purity itself.
IMPURE_LAYERS = tuple(
    f"relay_engine.{layer}" for layer in ("store", "ops", "loop", "agents", "git", "cli")
)
# Every module here must claim purity.
PURE_LAYERS = ("relay_engine.core", "relay_engine.contracts")


@dataclass(frozen=True)
class Module:
    path: Path  # relative to ROOT
    name: str  # dotted
    docstring: str | None
    has_code: bool  # anything besides a docstring
    imports: frozenset[str]  # dotted names, relative imports resolved

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def claims_purity(self) -> bool:
        return any(line.startswith("Pure") for line in (self.docstring or "").splitlines())

    @property
    def summary(self) -> str:
        """The docstring's first sentence, as Markdown."""
        if not self.docstring:
            return "(no docstring)"
        paragraph = " ".join(self.docstring.split("\n\n")[0].split())
        sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", paragraph, maxsplit=1)[0]
        sentence = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", sentence)  # :mod:`x` -> `x`
        return sentence.replace("``", "`").replace("|", "\\|")


def _dotted(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module, name: str, is_package: bool) -> frozenset[str]:
    """Every module a statement anywhere in the file imports (function bodies included),
    and for ``from P import n`` also ``P.n`` (it may be a module)."""
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(found)


def read_module(root: Path, path: Path) -> Module:
    tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=str(path))
    docstring = ast.get_docstring(tree)
    body = tree.body[1:] if docstring is not None else tree.body
    name = _dotted(path)
    return Module(path, name, docstring, bool(body), _imports(tree, name, path.stem == "__init__"))


def read_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every module of both packages by dotted name, empty files (package markers) left out."""
    modules: dict[str, Module] = {}
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            path = file.relative_to(root)
            if file.stat().st_size and "__pycache__" not in path.parts:
                module = read_module(root, path)
                modules[module.name] = module
    return modules


def _executed(name: str, modules: dict[str, Module]) -> list[Module]:
    """The relay modules an import of ``name`` runs: the module and its packages."""
    parts = name.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [modules[prefix] for prefix in prefixes if prefix in modules]


def _in(name: str, packages: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def impure_imports(module: Module, modules: dict[str, Module]) -> list[str]:
    """What ``module`` imports that a pure module may not."""
    bad = {name for name in module.imports if name.split(".")[0] in IMPURE_LIBRARIES}
    for name in module.imports:
        for executed in _executed(name, modules):
            if (
                _in(executed.name, IMPURE_LAYERS)
                and executed.has_code
                and not executed.claims_purity
            ):
                bad.add(executed.name)
    return sorted(bad)


def undocumented(modules: dict[str, Module], package: str = "relay_engine") -> list[Module]:
    return [m for m in modules.values() if _in(m.name, [package]) and m.docstring is None]


def unclaimed(modules: dict[str, Module]) -> list[Module]:
    """Modules of core and contracts whose docstring does not claim purity."""
    return [m for m in modules.values() if _in(m.name, PURE_LAYERS) and not m.claims_purity]


def contradicted(
    modules: dict[str, Module], package: str = "relay_engine"
) -> dict[Module, list[str]]:
    """Modules of ``package`` that claim purity, with the imports that contradict it."""
    found = {}
    for module in modules.values():
        in_package = _in(module.name, [package])
        if in_package and module.claims_purity and (bad := impure_imports(module, modules)):
            found[module] = bad
    return found


def purity_problems(modules: dict[str, Module]) -> list[str]:
    """The engine's broken docstring rules, one line each."""
    return [
        *(f"{m.path}: no docstring" for m in undocumented(modules)),
        *(f"{m.path}: no docstring line starting 'Pure'" for m in unclaimed(modules)),
        *(
            f"{m.path}: claims Pure, imports {', '.join(b)}"
            for m, b in contradicted(modules).items()
        ),
    ]


def _pure_cell(module: Module, modules: dict[str, Module]) -> str:
    if not module.claims_purity:
        return "no"
    bad = impure_imports(module, modules)
    return "yes" if not bad else "no: claimed, but imports " + ", ".join(f"`{b}`" for b in bad)


def _table(rows: list[Module], modules: dict[str, Module], strip: str) -> list[str]:
    lines = ["| module | what it is for | pure |", "|---|---|---|"]
    for module in rows:
        shown = module.path.as_posix().removeprefix(strip)
        lines.append(f"| `{shown}` | {module.summary} | {_pure_cell(module, modules)} |")
    return lines


def engine_layers(root: Path = ROOT) -> list[str]:
    """The engine's layers, top first, as pyproject.toml's layers contract lists them."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layered,) = [
        c
        for c in contracts
        if c["type"] == "layers" and all(e.startswith("relay_engine.") for e in c["layers"])
    ]
    return [part.strip() for entry in layered["layers"] for part in entry.split("|")]


def engine_section(modules: dict[str, Module], layers: list[str]) -> list[str]:
    engine = [m for m in modules.values() if _in(m.name, ["relay_engine"])]
    others = sorted({".".join(m.name.split(".")[:2]) for m in engine} - set(layers))
    lines: list[str] = []
    for layer in [*layers, *others]:
        rows = [m for m in engine if _in(m.name, [layer]) and m.name != layer]
        head = modules.get(layer)
        title = f"### `{layer}`" + (f" — {head.summary}" if head and head.docstring else "")
        lines += [title, "", *_table(rows, modules, "relay_engine/"), ""]
    return lines


def console_section(modules: dict[str, Module]) -> list[str]:
    rows = [m for m in modules.values() if _in(m.name, ["relay_tui"])]
    lines = _table(rows, modules, "relay_tui/")
    if claims := contradicted(modules, "relay_tui"):
        names = ", ".join(f"`{m.path.as_posix()}`" for m in claims)
        lines += ["", f"Purity claimed in a docstring but not borne out by the imports: {names}."]
    return lines


def _marker(package: str, end: str) -> str:
    return f"<!-- modules:{package}:{end} -->"


NOTE = (
    "<!-- generated by scripts/architecture.py from the module docstrings: edit those, "
    "then run it -->"
)


def render(page: str, root: Path = ROOT) -> str:
    """``page`` with the text between each package's markers regenerated."""
    modules = read_modules(root)
    sections = {
        "relay_engine": engine_section(modules, engine_layers(root)),
        "relay_tui": console_section(modules),
    }
    for package, lines in sections.items():
        begin, end = _marker(package, "begin"), _marker(package, "end")
        if page.count(begin) != 1 or page.count(end) != 1:
            raise SystemExit(f"{PAGE} needs exactly one {begin} and one {end}")
        head, rest = page.split(begin)
        _, tail = rest.split(end)
        body = "\n".join([NOTE, "", *lines]).rstrip("\n")
        page = f"{head}{begin}\n{body}\n{end}{tail}"
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args(argv)
    page_path = ROOT / PAGE
    current = page_path.read_text(encoding="utf-8")
    wanted = render(current)
    problems = purity_problems(read_modules())
    for problem in problems:
        print(f"purity: {problem}", file=sys.stderr)
    if args.check:
        if wanted != current:
            diff = difflib.unified_diff(
                current.splitlines(), wanted.splitlines(), str(PAGE), "regenerated", lineterm=""
            )
            print("\n".join(diff), file=sys.stderr)
            print(f"{PAGE} is stale: run python scripts/architecture.py", file=sys.stderr)
            return 1
    elif wanted != current:
        page_path.write_text(wanted, encoding="utf-8")
        print(f"{PAGE} rewritten")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
