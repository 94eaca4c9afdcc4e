"""The engine with agents that cannot work: not logged in, offline, CLI missing.

The "claude" and "codex" agents here run tests/replay_cli.py, a real process printing
what the real CLIs printed offline (tests/fixtures/realcli); tests/realcli runs the real ones.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    jobs,
    pid_gone,
    run_until_idle,
    running_engine,
    sim,
    tasks,
    wait_for,
)

from relay_engine.ops.completion import record_limit
from relay_engine.store.read_model.agents import agent_rows
from relay_engine.store.schema import AgentStatus, Task

HERE = Path(__file__).resolve().parents[1]  # tests/: replay_cli.py and fixtures/
REPLAY = [sys.executable, str(HERE / "replay_cli.py")]
CLAUDE_SUCCESS = HERE / "fixtures" / "streams" / "claude_success.jsonl"


def replay_agent(agent_id: str, cli: str, scenario: str, **env: str) -> dict[str, Any]:
    return {
        "id": agent_id,
        "provider": cli,
        "command": REPLAY,
        "env": {"REPLAY_CLI": cli, "REPLAY_SCENARIO": scenario, **env},
    }


WORKER = {"id": "worker", "provider": "command", "command": [sys.executable, "-c", "print('done')"]}


def state_marker(tmp_path: Path, cli: str, name: str) -> tuple[Path, str]:
    """A file the stand-in CLI checks, kept where the real CLI keeps its state (the agent's
    ``~/.<cli>``), so a sandboxed agent sees it; and the HOME that puts it there."""
    home = tmp_path / "home"
    (home / f".{cli}").mkdir(parents=True, exist_ok=True)
    return home / f".{cli}" / name, str(home)


def parked_run(workspace: Workspace, agent: dict[str, Any]) -> tuple[Any, Task]:
    """One long task on ``agent`` alone, run until it parks: its one execution, and it."""
    workspace.configure(agents=[agent])
    workspace.submit(job_toml("j", [{"id": "t", "timeout": 3600}]))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: tasks(store)["j/t"].state == "PARKED", what="parked", timeout=90)
        [run] = executions(store)
        return run, tasks(store)["j/t"]


def agent_status(workspace: Workspace, agent_id: str) -> dict[str, Any]:
    return next(a for a in workspace.status()["agents"] if a["id"] == agent_id)


def test_not_logged_in_swaps_to_the_next_capable_agent_without_using_an_attempt(
    workspace: Workspace,
) -> None:
    workspace.configure(
        agents=[replay_agent("claude-main", "claude", "claude-not-logged-in"), WORKER]
    )
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}]))
    assert run_until_idle(workspace.engine(), timeout=100)
    store = workspace.store()
    task = tasks(store)["j/t"]
    assert (task.state, task.agent, task.attempt) == ("SUCCEEDED", "worker", 1)
    runs = {e.agent: e.outcome for e in executions(store)}
    assert runs == {"claude-main": "unavailable", "worker": "succeeded"}
    claude = agent_status(workspace, "claude-main")
    assert claude["status"] == "auth"
    assert claude["reason"] == "Not logged in · Please run /login"
    assert "/login" in claude["fix"]
    assert agent_status(workspace, "worker")["status"] == "ready"


@pytest.mark.slow
def test_auth_on_the_only_capable_agent_parks_and_clearing_it_resumes(
    workspace: Workspace, tmp_path: Path
) -> None:
    logged_in, home = state_marker(tmp_path, "claude", "logged-in")
    claude = replay_agent(
        "claude-main",
        "claude",
        "claude-not-logged-in",
        HOME=home,
        REPLAY_LOGGED_IN=str(logged_in),
        REPLAY_SUCCESS=str(CLAUDE_SUCCESS),
    )
    workspace.configure(agents=[claude])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}]))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: tasks(store)["j/t"].state == "PARKED", what="parked", timeout=90)
        task = tasks(store)["j/t"]
        assert task.attempt == 0  # refunded: the task did nothing wrong
        assert task.not_before is None  # no clock will fix a login
        assert task.error == "waiting on agent claude-main: Not logged in · Please run /login"
        row = next(t for t in workspace.status()["tasks"] if t["key"] == "j/t")
        assert row["error"] == task.error
        time.sleep(0.5)
        assert len(executions(store)) == 1  # parked means no relaunch storm
        logged_in.touch()  # the operator logs in, then clears the agent
        reset = workspace.cli("agents", "reset", "claude-main")
        assert reset.returncode == 0, reset.stderr
        assert "available again" in reset.stdout
        wait_for(lambda: tasks(store)["j/t"].state == "SUCCEEDED", what="succeeded", timeout=90)
        # the job settles on a tick after its last task's: stopped before it, it stays ACTIVE
        wait_for(lambda: jobs(store)["j"].state == "SUCCEEDED", what="job done", timeout=30)
    assert agent_status(workspace, "claude-main")["status"] == "ready"


def test_a_changed_agent_config_clears_its_auth_state(workspace: Workspace) -> None:
    workspace.configure(agents=[replay_agent("claude-main", "claude", "claude-not-logged-in")])
    workspace.submit(job_toml("j", [{"id": "t"}]))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: tasks(store)["j/t"].state == "PARKED", what="parked", timeout=90)
        fixed = replay_agent(
            "claude-main", "claude", "claude-not-logged-in", ANTHROPIC_API_KEY="sk-x"
        )
        workspace.configure(agents=[fixed, WORKER | {"id": "spare"}])
        wait_for(lambda: tasks(store)["j/t"].state == "SUCCEEDED", what="resumed", timeout=90)
    with store.read() as session:
        row = session.get(AgentStatus, "claude-main")
    assert row is None or row.status in ("ready", "auth")  # it may have failed again: fine
    assert tasks(store)["j/t"].attempt == 1


@pytest.mark.slow
def test_codex_waiting_for_the_network_is_stopped_long_before_the_task_timeout(
    workspace: Workspace,
) -> None:
    codex = replay_agent(
        "codex-main", "codex", "codex-offline", REPLAY_LINE_DELAY="0.2", REPLAY_HANG="1"
    )
    run, task = parked_run(workspace, codex)
    assert run.outcome == "unavailable"
    assert "waiting for network" in (run.error or "")
    assert task.attempt == 0
    status = agent_status(workspace, "codex-main")
    assert status["status"] == "unreachable"
    assert status["until"] == pytest.approx(run.ended_at + 30, abs=1)
    assert status["fix"].startswith("no network: will probe again at ")
    assert task.not_before == pytest.approx(status["until"])
    assert run.pid is not None and pid_gone(run.pid)


def test_gemini_retrying_a_dead_network_on_stderr_only_is_stopped_and_parked(
    workspace: Workspace,
) -> None:
    """Offline, the real gemini retries "fetch failed" with back-off for minutes and prints
    nothing on stdout: the reaper's look at stderr is what stops it."""
    gemini = replay_agent("gemini-main", "gemini", "gemini-api-key-offline", REPLAY_HANG="1")
    run, task = parked_run(workspace, gemini)
    assert run.outcome == "unavailable"
    assert "fetch failed" in (run.error or "")
    assert task.attempt == 0
    assert agent_status(workspace, "gemini-main")["status"] == "unreachable"
    assert run.pid is not None and pid_gone(run.pid)


def test_a_missing_cli_is_the_agents_problem_not_the_tasks(workspace: Workspace) -> None:
    missing = {"id": "codex-main", "provider": "codex", "command": ["codex-not-installed-here"]}
    workspace.configure(agents=[missing, WORKER])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1, "sim": sim()}]))
    assert run_until_idle(workspace.engine(), timeout=100)
    store = workspace.store()
    assert tasks(store)["j/t"].state == "SUCCEEDED"
    status = agent_status(workspace, "codex-main")
    assert status["status"] == "cli-missing"
    assert "npm install -g @openai/codex" in status["fix"]


@pytest.mark.slow
def test_doctor_with_one_good_and_one_missing_cli(workspace: Workspace) -> None:
    good = replay_agent("claude-main", "claude", "claude-not-logged-in", ANTHROPIC_API_KEY="k")
    missing = {"id": "codex-main", "provider": "codex", "command": ["codex-not-installed-here"]}
    workspace.configure(agents=[good, missing])
    result = workspace.cli("doctor")
    assert result.returncode == 1
    assert "cannot run: codex-main" in result.stderr
    report = workspace.cli("doctor", "--json")
    assert report.returncode == 1
    claude, codex = json.loads(report.stdout)["agents"]
    assert claude["ok"] and claude["version"] == "2.1.197 (Claude Code)"  # as the CLI says
    assert claude["argv"] == "--permission-mode acceptEdits"
    assert claude["login"] == "logged in (ANTHROPIC_API_KEY)"
    assert codex["problems"] == ["codex-not-installed-here not found"]
    assert "npm install -g @openai/codex" in codex["fix"]
    workspace.configure(agents=[good, missing | {"enabled": False}])
    result = workspace.cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every enabled agent can run" in result.stdout


def test_doctor_names_a_flag_the_installed_version_does_not_know(workspace: Workspace) -> None:
    codex = replay_agent("codex-main", "codex", "codex-offline", CODEX_API_KEY="k")
    workspace.configure(agents=[codex | {"args": ["--full-auto"]}])
    result = workspace.cli("doctor", "--json")
    assert result.returncode == 1
    [codex_row] = json.loads(result.stdout)["agents"]
    assert codex_row["problems"] == ["--full-auto is not in this version's --help"]


@pytest.mark.slow
def test_a_limit_reset_already_past_launches_at_most_twice_a_minute(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    workspace.path.mkdir()
    past = int(time.time()) - 3600
    agent = {
        "id": "claude-main",
        "provider": "claude",
        "command": [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", "claude"],
    }
    workspace.configure(agents=[agent])
    # the CLI says "limited until an hour ago" on every run (no until_epoch: it never stops)
    limited = sim(0.05, rate_limit={"message": f"Claude AI usage limit reached|{past}"})
    workspace.submit(job_toml("j", [{"id": "t", "sim": limited}]))
    store = workspace.store()
    try:
        with running_engine(workspace.engine()):
            # 20 s show the rate: a relaunch loop (or past resets floored to MIN_WAIT_S, 5 s)
            # launches more than twice in them, and the park's back-off below says no
            # third launch comes within the minute.
            time.sleep(20)
            launches = len(executions(store))
            task = tasks(store)["j/t"]
        assert 1 <= launches <= 2
        assert task.state == "PARKED"
        assert task.not_before is not None and task.not_before >= time.time() + 200
    finally:
        workspace.close()


def test_codex_tools_warning_is_an_event_and_limited_providers_show_per_agent(
    workspace: Workspace,
) -> None:
    codex = {"id": "codex-main", "provider": "codex", "tools": ["Read"]}
    workspace.configure(agents=[codex, WORKER])
    engine = workspace.engine()
    engine.register()
    try:
        store = workspace.store()
        [warning] = events(store, "config.warning")
        assert "codex has no tool allow-list flag" in warning.message
        with store.write() as session:
            record_limit(session, "codex", time.time() + 600, "usage limit reached", time.time())
        with store.read() as session:
            rows = {row.id: row for row in agent_rows(session, time.time())}
        assert rows["codex-main"].status == "limited"
        assert rows["codex-main"].summary.startswith("limited until ")
        assert rows["worker"].summary == "ready"
    finally:
        engine.shutdown(release=True)


def test_a_due_probe_that_gets_through_makes_the_agent_ready_again(
    workspace: Workspace, tmp_path: Path
) -> None:
    online, home = state_marker(tmp_path, "codex", "online")
    codex = replay_agent(
        "codex-main",
        "codex",
        "codex-offline",
        HOME=home,
        REPLAY_HANG="1",
        REPLAY_LOGGED_IN=str(online),
        REPLAY_SUCCESS=str(HERE / "fixtures" / "streams" / "codex_success.jsonl"),
    )
    workspace.configure(agents=[codex])
    workspace.submit(job_toml("j", [{"id": "t"}]))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: tasks(store)["j/t"].state == "PARKED", what="parked", timeout=90)
        online.touch()  # the network is back
        with store.write() as session:  # and the 30 s back-off has passed
            session.get(AgentStatus, "codex-main").until = time.time()  # type: ignore[union-attr]
            session.get(Task, "j/t").not_before = time.time()  # type: ignore[union-attr]
        wait_for(
            lambda: tasks(store)["j/t"].state == "SUCCEEDED", what="probe ran the task", timeout=60
        )
    assert [e.outcome for e in executions(store)] == ["unavailable", "succeeded"]
    assert agent_status(workspace, "codex-main")["status"] == "ready"
    assert tasks(store)["j/t"].attempt == 1
