"""The troubleshooter's contract: its answer parsed into a verdict, and the record of a failed
run it is shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_engine.contracts.troubleshooter import Verdict, parse_verdict
from relay_engine.ops.troubleshoot import run_record
from relay_engine.store.schema import Execution


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"verdict": "retry", "guidance": "g"}, Verdict(verdict="retry", guidance="g")),
        ({"verdict": "give_up", "reason": "r", "extra": 1}, Verdict(verdict="give_up", reason="r")),
        ({"verdict": "shrug"}, "verdict: Input should be 'retry', 'replan' or 'give_up'"),
        ({"summary": "done"}, "verdict: Field required"),
        ("retry", "no JSON object with a verdict in the result"),
        (None, "no JSON object with a verdict in the result"),
    ],
)
def test_parse_verdict(raw: object, expected: object) -> None:
    assert parse_verdict(raw) == expected


def test_a_failed_start_shows_the_troubleshooter_its_error_file(tmp_path: Path) -> None:
    """A worktree that could not be made leaves error.txt, not stderr: the troubleshooter
    is told which files there are and reads why."""
    folder = tmp_path / "exec-1"
    folder.mkdir()
    (folder / "prompt.md").write_text("the task")
    (folder / "error.txt").write_text("stage: worktree\nfatal: 'x' already exists\n")
    run = Execution(
        id="exec-1", job_id="j", task_key="j/t", attempt=2, agent="sim", provider="sim",
        outcome="failed", error="worktree: fatal", artifact_dir=str(folder),
    )  # fmt: skip
    record = run_record(run)
    assert f"artifacts: {folder} (error.txt, prompt.md)" in record
    assert "fatal: 'x' already exists" in record
    assert "stderr.txt" not in record
