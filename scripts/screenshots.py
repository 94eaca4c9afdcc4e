"""Regenerate screenshots/*.svg from the same fixed states as the snapshot tests.

Run: .venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tui")]
os.environ["TZ"] = "UTC"
time.tzset()

from console_helpers import attached_app  # noqa: E402
from test_snapshots import pressing  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from relay_tui.demo.sample import write_empty, write_sample  # noqa: E402

Step = Callable[[Pilot[None]], Awaitable[None]]

SHOTS: dict[str, tuple[tuple[int, int], Step, bool]] = {
    "console-160x48": ((160, 48), pressing(row="search/docs"), True),
    "console-120x36": ((120, 36), pressing(row="search/docs"), True),
    "console-80x24": ((80, 24), pressing(row="search/docs"), True),
    "detail": ((120, 36), pressing("enter", row="search/docs"), True),
    "diff": ((120, 36), pressing("enter", "d", row="search/schema"), True),
    "job": ((120, 36), pressing("enter", row="job:search"), True),
    "planner": ((80, 24), pressing("4", "down"), True),
    "replan": ((80, 24), pressing("p", *"split by region", row="search/api"), True),
    "cancel": ((80, 24), pressing("c", row="search/docs"), True),
    "pin": ((80, 24), pressing("a", row="search/api"), True),
    "approve": ((80, 24), pressing("g", row="billing/reports"), True),
    "help": ((100, 36), pressing("question_mark"), True),
    "filter": ((100, 30), pressing("slash", *"failed"), True),
    "usage": ((120, 36), pressing("u"), True),
    "merge": ((80, 24), pressing("m", row="job:login"), True),
    "agent-reset": ((100, 30), pressing("R", row="agent:gemini-b", pane="providers"), True),
    "budget": ((80, 24), pressing("b", row="job:docs-site"), True),
    "empty": ((100, 30), pressing(), False),
    "needs-you": ((120, 36), pressing("6", row="ask:7", pane="needs"), True),
    "waits": ((120, 36), pressing(row="i18n/translate"), True),
}


async def shoot(name: str, size: tuple[int, int], steps: Step, sample: bool, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        url = write_sample(path) if sample else write_empty(path)
        app = attached_app(path, url)
        async with app.run_test(size=size) as pilot:
            await steps(pilot)
            app.save_screenshot(f"{name}.svg", path=str(out))
        app.store.dispose()


def main() -> None:
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    for stale in out.glob("*.svg"):
        if stale.stem not in SHOTS:
            stale.unlink()
    for name, (size, steps, sample) in SHOTS.items():
        asyncio.run(shoot(name, size, steps, sample, out))
        print(f"screenshots/{name}.svg")


if __name__ == "__main__":
    main()
