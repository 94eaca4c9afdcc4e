"""Whatever an agent prints, the engine writes its run down and goes on, and relay's own
listings stay readable.

Each CLI's recorded session (claude, codex, gemini, opencode, qwen, copilot: the stub runs
in tests/fixtures/realcli) is printed by a real process under the engine, once with every
number made absurd in each way (``1e400``, ``NaN``, integers past 64 bits and past a
float, 5,000 digits) and once with hostile text put into its strings (a NUL, half an
emoji, a screen clear, a clipboard write, a markup tag, a direction override). Each of
these stopped ``relay run`` before, leaving its task RUNNING for the next engine to trip
on, or reached the operator's terminal.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from absurd_output import ABSURD, with_junk, with_numbers
from helpers import Workspace, job_toml, run_until_idle, tasks

REALCLI = Path(__file__).resolve().parents[1] / "fixtures" / "realcli"
SESSIONS = {
    "claude": "claude-stub-write-and-bash",
    "codex": "codex-stub-patch-and-command",
    "gemini": "gemini-stub-write-and-shell",
    "opencode": "opencode-stub-write-and-bash",
    "qwen": "qwen-stub-write-and-shell",
    "copilot": "copilot-stub-patch-and-bash",
}
ENDED = {"SUCCEEDED", "FAILED"}


def printing_agent(agent_id: str, provider: str, stdout: bytes, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    """An agent of ``provider`` whose process prints ``stdout`` and exits 0."""
    out = tmp_path / f"{agent_id}.out"
    out.write_bytes(stdout)
    printer = f"import sys; sys.stdout.buffer.write(open({str(out)!r}, 'rb').read())"
    return {"id": agent_id, "provider": provider, "command": [sys.executable, "-c", printer],
            "sandbox": "none"}  # fmt: skip


def hostile_sessions(rng: random.Random) -> dict[str, tuple[str, bytes]]:
    """Agent id -> (provider, what it prints): each session once per absurd number, and
    twice with junk in its text."""
    found = {}
    for provider, name in SESSIONS.items():
        text = (REALCLI / name / "stdout.txt").read_text(encoding="utf-8", errors="replace")
        for kind, absurd in ABSURD.items():
            found[f"{provider}-{kind}"] = (provider, with_numbers(text, absurd).encode())
        for round_ in (1, 2):
            junk = with_junk(text, rng).encode("utf-8", "surrogatepass")
            found[f"{provider}-junk{round_}"] = (provider, junk)
    return found


@pytest.mark.slow
def test_every_cli_printing_hostile_output_ends_its_task_and_the_engine_goes_on(
    workspace: Workspace, tmp_path: Path
) -> None:
    seed = random.randrange(100_000)
    print(f"seed {seed}")
    sessions = hostile_sessions(random.Random(seed))
    agents = [
        printing_agent(agent_id, provider, stdout, tmp_path)
        for agent_id, (provider, stdout) in sessions.items()
    ]
    workspace.configure(agents=agents, capacity=8)
    steps = [{"id": agent_id, "agent": agent_id, "max_attempts": 1} for agent_id in sessions]
    workspace.submit(job_toml("hostile", steps))

    run_until_idle(workspace.engine(), timeout=240)  # returned: the engine did not stop

    states = {key: task.state for key, task in tasks(workspace.store()).items()}
    print({state: list(states.values()).count(state) for state in set(states.values())})
    assert {key: state for key, state in states.items() if state not in ENDED} == {}, seed
    # Those that fail do so as the CLI said: copilot's exitCode made absurd, or lines of
    # 5,000-digit numbers that no JSON reader takes (46 of 54 succeed).
    assert sum(state == "SUCCEEDED" for state in states.values()) >= len(SESSIONS), states

    status = workspace.cli("status", "--json")
    assert status.returncode == 0, status.stderr
    assert len(json.loads(status.stdout)["jobs"]) == 1
    for listing in (("status",), ("events", "--limit", "400")):
        shown = workspace.cli(*listing)
        assert shown.returncode == 0, (listing, shown.stderr)
        assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout, listing
