"""A full disk pauses dispatch and charges nothing; the engine lives on and resumes.

Runs on a small tmpfs mounted for the test (root only); skipped, with the reason, where
no tmpfs can be mounted.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import EngineThread, Workspace, events, executions, job_toml, sim, tasks, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    """Write until the filesystem says it is full (it may say so at the first byte)."""
    chunk = b"\0" * (64 << 10)
    try:
        with open(path, "wb") as fh:
            while True:
                fh.write(chunk)
                fh.flush()
    except OSError as error:
        assert error.errno == errno.ENOSPC


def test_a_full_disk_pauses_dispatch_charges_nothing_and_resumes(small_disk: Path) -> None:
    workspace = Workspace(small_disk / "ws")
    workspace.path.mkdir()
    workspace.configure(capacity=2, lease=60.0)
    count = 16
    workspace.submit(
        job_toml("full", [{"id": f"t{i:02d}", "sim": sim(0.4, lines=4)} for i in range(count)])
    )
    store = workspace.store()
    engine = workspace.engine()
    thread = EngineThread(engine).start()
    filler = small_disk / "filler"
    try:
        wait_for(
            lambda: sum(t.state == "SUCCEEDED" for t in tasks(store).values()) >= 2,
            timeout=60,
            what="some work done",
        )
        fill(filler)
        wait_for(lambda: engine.condition == "disk full", timeout=60, what="the engine to notice")
        status = workspace.cli("status")
        assert status.returncode == 0, status.stderr
        assert "disk full" in status.stderr
        assert thread.thread.is_alive()
        assert not any(t.state == "FAILED" for t in tasks(store).values())

        filler.unlink()
        wait_for(
            lambda: all(t.state == "SUCCEEDED" for t in tasks(store).values()),
            timeout=120,
            what="every task to succeed once space is back",
        )
        assert engine.condition is None
    finally:
        filler.unlink(missing_ok=True)
        thread.stop()
    final = tasks(store)
    assert {t.attempt for t in final.values()} == {1}  # the full disk cost no task an attempt
    assert not any(e.outcome == "failed" for e in executions(store))
    assert events(store, "engine.resumed")
    for released in events(store, "task.released"):  # runs the full disk broke were refunded
        assert "(attempt refunded)" in released.message
    workspace.close()
