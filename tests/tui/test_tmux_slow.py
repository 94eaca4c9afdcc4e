"""The real ``relay-tui --demo`` in a terminal, for minutes: bursts of random keys at the
three sizes find no crash, and the demo still starts agents long after its first jobs.

Both are slow (``-m slow``): the key bursts run 60 s per size (about 3.5 min in all, one
core), the demo watch 5 min (mostly idle waiting). Seeds are printed; ``RELAY_TEST_SEED``
repeats a run.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from tmux_helpers import Tmux, crash_files, relay_tui

pytestmark = pytest.mark.slow

BURST_KEYS = (
    *"crpagCmxbRTSuyAnfvls12345dowej",
    "Enter", "Escape", "Escape", "Tab", "BTab", "Up", "Down", "Up", "Down", "PPage", "NPage",
    "Home", "End", "Left", "Right", "BSpace", "Space", "C-p", "?", "/", "G", "C-d",
)  # fmt: skip
"""What the console binds (every screen's and dialog's keys), typing, and the palette;
q, ctrl+c and ctrl+q, which quit, are left out."""
SCREENS = {
    "detail": "Output",
    "job view": "Dependency graph",
    "usage": " Usage ",
    "help": "relay keys",
    "palette": "Search for commands",
    "dialog": "(y)",
    "text box": "Cancel",
}
"""What each screen shows, to count which ones a run reached."""
SECONDS_PER_SIZE = 35.0


def seed_for(size: tuple[int, int]) -> int:
    base = int(os.environ.get("RELAY_TEST_SEED", time.time_ns() % 100_000))
    return base + size[0]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("size", [(80, 24), (120, 36), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_bursts_of_random_keys_on_every_screen_find_no_crash(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    seed = seed_for(size)
    print(f"seed {seed} at {size[0]}x{size[1]} (RELAY_TEST_SEED={seed - size[0]} repeats it)")
    rng = random.Random(seed)
    crashes = tmp_path / "tmp"
    crashes.mkdir()
    tmux = Tmux(f"keys{size[0]}", tmp_path, env={"TMPDIR": str(crashes)})
    reached: set[str] = set()
    bursts = quits = 0
    exit_file = tmp_path / "exit"
    try:
        tmux.start(relay_tui("--demo"), size, exit_file)
        tmux.wait_for(lambda screen: "Jobs & tasks" in screen, timeout=60)
        deadline = time.monotonic() + SECONDS_PER_SIZE
        while time.monotonic() < deadline:
            tmux.keys(*(rng.choice(BURST_KEYS) for _ in range(rng.randint(5, 40))))
            bursts += 1
            time.sleep(rng.uniform(0.05, 0.4))
            screen = tmux.screen()
            reached |= {name for name, mark in SCREENS.items() if mark in screen}
            if exit_file.exists():  # the palette's Quit, typed at random: a clean exit is fine
                time.sleep(0.5)
                status = exit_file.read_text().strip()
                assert status == "0", f"seed {seed}: relay-tui exited {status}:\n{screen}"
                quits += 1
                exit_file.unlink()
                tmux.kill()
                tmux.start(relay_tui("--demo"), size, exit_file)
                tmux.wait_for(lambda text: "Jobs & tasks" in text, timeout=60)
            elif rng.random() < 0.15:  # back to the main screen now and then, to start over
                tmux.keys("Escape", "Escape", "Escape")
        assert not crash_files(crashes), f"seed {seed}: {crash_files(crashes)}"
        print(f"seed {seed}: {bursts} bursts, {quits} clean quits; reached {sorted(reached)}")
    finally:
        tmux.kill()
    assert not crash_files(crashes), f"seed {seed}: a crash file was written"


@pytest.mark.timeout(600)
def test_the_demo_still_starts_agents_after_five_minutes(tmp_path: Path) -> None:
    """The Running agents pane changes at least every 30 s, for 5 minutes and more."""
    tmux = Tmux("demo", tmp_path, env={"TMPDIR": str(tmp_path)})
    try:
        tmux.start(relay_tui("--demo"), (160, 48), tmp_path / "exit")
        tmux.wait_for(lambda screen: "Running agents" in screen, timeout=60)
        started = time.monotonic()
        last, changed_at, changes = running_pane(tmux.screen()), started, 0
        longest = 0.0
        while time.monotonic() - started < 330:
            time.sleep(2)
            now = running_pane(tmux.screen())
            if now != last:
                longest = max(longest, time.monotonic() - changed_at)
                last, changed_at, changes = now, time.monotonic(), changes + 1
            assert time.monotonic() - changed_at < 30, f"nothing moved for 30 s:\n{now}"
        late = [row for row in last.splitlines() if "/" in row]
        print(f"{changes} changes of the Running agents pane; longest still {longest:.0f} s")
        assert late or changes, "no agent ran after 5 minutes"
    finally:
        tmux.kill()
    assert not crash_files(tmp_path)


def running_pane(screen: str) -> str:
    """The tasks in the Running agents pane (the first cell of each row under its title:
    elapsed and idle times move every second, which is not an agent starting)."""
    lines = screen.splitlines()
    top = next((i for i, line in enumerate(lines) if "2 Running agents" in line), None)
    if top is None:
        return ""
    rows = []
    for line in lines[top + 2 :]:
        right = line[len(line) // 2 :]
        if "╰" in right:
            break
        cells = (right.split("│")[1] if "│" in right else right).split()
        rows.append(cells[0] if cells else "")
    return "\n".join(row for row in rows if row)
