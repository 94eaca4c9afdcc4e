"""The ``relay-tui`` command: arguments, the demo workspace, and an honest exit status."""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from relay_engine.cli.startup import imports_frozen
from relay_engine.contracts.config import ConfigError
from relay_engine.core.faults import DatabaseFault
from relay_engine.store.db import SchemaError
from relay_tui.crash import crash_message

if TYPE_CHECKING:
    from relay_tui.app import RelayApp


def missing_sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names, when it does not exist (None otherwise)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1] if "///" in url else ""
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    file = Path(path)
    return None if file.exists() else file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relay-tui", description="The relay operator console.")
    parser.add_argument(
        "--workspace", type=Path, default=Path.cwd(), help="workspace directory (default: cwd)"
    )
    parser.add_argument("--db", metavar="URL", help="attach to this database; no embedded engine")
    parser.add_argument(
        "--create",
        action="store_true",
        help="with --db: create the SQLite file when it does not exist yet",
    )
    parser.add_argument(
        "--demo", action="store_true", help="run sim agents in a throw-away workspace"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    with imports_frozen():
        args = build_parser().parse_args(argv)
        import_module("relay_tui.app")  # Textual and the console's widgets, frozen with the rest
    if args.db and not args.create:
        missing = missing_sqlite_file(args.db)
        if missing is not None:
            print(
                f"relay-tui: --db {args.db}: no database file at {missing}\n"
                "(a typo would otherwise show an empty new database; pass --create to make one)",
                file=sys.stderr,
            )
            return 2
    workspace: Path = args.workspace
    feeder = None
    if args.demo:
        from relay_tui.demo.feeder import DemoFeeder
        from relay_tui.demo.workspace import make_demo_workspace

        workspace = make_demo_workspace()
        feeder = DemoFeeder(workspace)  # new work keeps coming until the console quits
        feeder.start()
    try:
        return run(workspace, args.db, args.demo)
    finally:
        if feeder is not None:
            feeder.stop()
            shutil.rmtree(workspace, ignore_errors=True)


def run(
    workspace: Path,
    db_url: str | None,
    demo: bool,
    *,
    app_class: type[RelayApp] | None = None,
    headless: bool = False,
) -> int:
    """Run the console; a crash prints where its traceback is and exits non-zero."""
    from relay_tui.app import RelayApp

    try:
        app = (app_class or RelayApp)(workspace, db_url=db_url, demo=demo)
    except (ConfigError, SchemaError, DatabaseFault) as error:
        print(f"error: {error}", file=sys.stderr)  # the line `relay --db … status` prints
        return 2
    try:
        app.run(headless=headless)
    finally:
        if app.engine is not None and app.engine.running:
            app.engine.stop()  # a crash must not leave agents running
        app.store.dispose()
    if app.crash_error is not None:
        where = app.crash_report or Path("(the traceback could not be written)")
        print(
            crash_message(app.crash_error, where, embedded=app.engine is not None), file=sys.stderr
        )
        return app.return_code or 1
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
