"""The sim reviewer, run as a real process: it answers the review contract on the rounds a
test chooses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from relay_engine.contracts.review import (
    ReviewResult,
    validate_review_output,
)

FINDING = {"file": "cli.py", "line": 3, "severity": "major", "text": "errors are swallowed"}


def run_sim(script: dict, cwd: Path) -> dict:
    result_file = cwd / "result.json"
    env = {
        **os.environ,
        "RELAY_SIM_SCRIPT": json.dumps({"duration": 0, "lines": 0, **script}),
        "RELAY_RESULT_FILE": str(result_file),
    }
    subprocess.run(
        [sys.executable, "-m", "relay_engine.agents.sim_agent", "-p", "review"],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )
    return json.loads(result_file.read_text())


def test_the_sim_reviewer_asks_for_changes_on_the_chosen_rounds(tmp_path: Path) -> None:
    review = {"changes_on_rounds": [2], "findings": [FINDING]}
    first = run_sim({"review": review, "review_round": 1}, tmp_path)
    second = run_sim({"review": review, "review_round": 2}, tmp_path)
    assert first["verdict"] == "approve"
    assert second == {
        "verdict": "changes",
        "summary": "round 2: changes needed",
        "findings": [FINDING],
    }
    assert isinstance(validate_review_output(second), ReviewResult)
