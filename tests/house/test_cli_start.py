"""``relay status`` starts without the libraries only other commands use.

Hundreds of tests and every operator's glance start the CLI, so what it imports before
its first read is paid each time: Alembic (only a migration needs it), GitPython (only
the commands that touch a worktree) and croniter (only submitting and scheduling). Each of
them came back once through one module-level import on the way to ``relay status``; this
test names the import that did. A behaviour, never a timing: it asserts what is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_ON_STATUS = ("alembic", "git", "croniter")

PROBE = f"""
import json, sys
from relay_engine.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({{"exit": code, "loaded": [m for m in {NOT_ON_STATUS!r} if m in sys.modules]}}))
"""
"""The ``relay`` entry point run as the console script runs it, then what it loaded."""


def _relay(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("RELAY_DB", None)
    argv_ = [sys.executable, *argv]
    return subprocess.run(
        argv_, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_relay_status_loads_no_alembic_git_or_croniter(tmp_path: Path) -> None:
    for step in (["init"], ["submit", str(tmp_path / "example-job.toml")]):
        made = _relay("-m", "relay_engine.cli", "--workspace", str(tmp_path), *step)
        assert made.returncode == 0, made.stdout + made.stderr
    probe = _relay("-c", PROBE, "--workspace", str(tmp_path), "status", "--json")
    assert probe.returncode == 0, probe.stderr
    outcome = json.loads(probe.stdout.splitlines()[-1])
    assert outcome == {"exit": 0, "loaded": []}, (
        f"`relay status` imported {outcome['loaded']}: import it in the module that uses it, "
        "off the way from relay_engine.cli.main to the status command "
        "(python -X importtime -c 'import relay_engine.cli.status' shows who pulls it in)"
    )
