"""The ``relay`` command as an operator uses it: submit, run, status, cancel, retry."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    Workspace,
    cli_env,
    executions,
    job_toml,
    kill_quietly,
    pid_gone,
    sim,
    stop_process,
    task_state,
    wait_for,
)

GOOD = job_toml("good", [{"id": "a", "sim": sim()}, {"id": "b", "depends_on": ["a"], "sim": sim()}])

# name -> (file text, field named on stderr, reason on stderr)
REJECTIONS: dict[str, tuple[str, str, str]] = {
    "bad toml": ('[job]\nid = "x"\n[[tasks]\nid = "a"\n', "line 3, column 8", "invalid TOML"),
    "no job table": ('[[tasks]]\nid = "a"\n', "job", "missing [job] table"),
    "unknown field": (
        job_toml("x", [{"id": "a", "colour": "red"}]),
        "tasks[0] (a).colour",
        "unknown field",
    ),
    "duplicate ids": (
        job_toml("x", [{"id": "a"}, {"id": "a"}]),
        "tasks[1] (a).id",
        "duplicate task id 'a'",
    ),
    "unknown dependency": (
        job_toml("x", [{"id": "a", "depends_on": ["ghost"]}]),
        "tasks[0] (a).depends_on",
        "depends on unknown task 'ghost'",
    ),
    "cycle": (
        job_toml(
            "x",
            [
                {"id": "a", "depends_on": ["b"]},
                {"id": "b", "depends_on": ["c"]},
                {"id": "c", "depends_on": ["a"]},
            ],
        ),
        "tasks[0] (a).depends_on",
        "dependency cycle: a -> b -> c -> a",
    ),
    "unknown role": (
        job_toml("x", [{"id": "a", "role": "wizard"}]),
        "tasks[0] (a).role",
        "unknown role 'wizard'",
    ),
    "unknown agent": (
        job_toml("x", [{"id": "a", "agent": "hal"}]),
        "tasks[0] (a).agent",
        "unknown agent 'hal' (known agents: sim)",
    ),
}


@pytest.mark.slow
def test_bad_job_files_are_rejected_whole_with_file_field_and_reason(
    sqlite_workspace: Workspace,
) -> None:
    workspace = sqlite_workspace
    for name, (text, field, reason) in REJECTIONS.items():
        path = workspace.write_job(text, f"{name.replace(' ', '-')}.toml")
        result = workspace.cli("submit", str(path))
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        assert f"{path}: {field}: " in result.stderr, (name, result.stderr)
        assert reason in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr

    # One bad file among good ones stores nothing either.
    good = workspace.write_job(GOOD, "good.toml")
    bad = workspace.path / "cycle.toml"
    result = workspace.cli("submit", str(good), str(bad))
    assert result.returncode == 2, result.stdout
    assert workspace.status()["jobs"] == []


@pytest.mark.slow
def test_resubmitting_is_a_no_op_and_a_changed_job_under_the_same_id_is_refused(
    workspace: Workspace,
) -> None:
    first = workspace.write_job(GOOD, "good.toml")
    assert workspace.cli("submit", str(first)).returncode == 0
    elsewhere = workspace.path / "copies" / "same.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(GOOD)

    again = workspace.cli("submit", str(first), str(elsewhere))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("unchanged (already submitted)") == 2

    changed = workspace.write_job(GOOD.replace('"b"', '"c"'), "changed.toml")
    refused = workspace.cli("submit", str(changed))
    assert refused.returncode == 2
    assert f"{changed}: job 'good' already exists with a different definition" in refused.stderr

    report = workspace.status()
    assert [j["id"] for j in report["jobs"]] == ["good"]
    assert [t["id"] for t in report["tasks"]] == ["a", "b"]


@pytest.mark.slow
def test_run_until_idle_exits_3_naming_the_ways_out_of_a_blocked_job(
    workspace: Workspace,
) -> None:
    definitions = [
        {"id": "broken", "max_attempts": 2, "sim": sim(fail_attempts=9)},
        {"id": "next", "depends_on": ["broken"], "sim": sim()},
        {"id": "fine", "sim": sim()},
    ]
    workspace.submit(job_toml("bad", definitions))

    result = workspace.cli("run", "--until-idle")

    assert result.returncode == 3, result.stdout + result.stderr
    assert "waiting (1):" in result.stdout
    assert "job bad waits for you: broken failed" in result.stdout
    assert "relay retry bad/broken, relay drop bad/broken" in result.stdout
    report = workspace.status()
    assert [j["state"] for j in report["jobs"]] == ["BLOCKED"]
    by_id = {t["id"]: t for t in report["tasks"]}
    assert (by_id["broken"]["state"], by_id["broken"]["attempt"]) == ("FAILED", 2)
    assert (by_id["next"]["state"], by_id["next"]["blocked_by"]) == ("DRAFT", "broken")
    assert by_id["fine"]["state"] == "SUCCEEDED"


GATED_PLANNER = {
    "duration": 0.05,
    "results_by_round": {
        "1": {
            "objective_status": "in_progress",
            "assessment": "two waves",
            "next_tasks": [
                {"id": "a", "title": "do a", "sim": sim()},
                {"id": "b", "title": "do b", "dependencies": ["a"], "sim": sim()},
            ],
        },
        "2": {"objective_status": "satisfied", "assessment": "done", "next_tasks": []},
    },
}


def gated_job() -> str:
    return job_toml(
        "gate", [], mode="autonomous", objective="two waves", wave_gate="operator",
        sim=GATED_PLANNER,
    )  # fmt: skip


def test_run_until_idle_exits_3_when_a_wave_awaits_approval(workspace: Workspace) -> None:
    workspace.submit(gated_job())

    result = workspace.cli("run", "--until-idle", "--quiet")

    assert result.returncode == 3, result.stdout + result.stderr
    assert "task gate/b waits for approval of wave 2: relay approve gate" in result.stdout
    status = workspace.cli("status", "gate")
    assert "waits for approval of wave 2: relay approve gate" in status.stdout
    (b,) = [t for t in workspace.status()["tasks"] if t["id"] == "b"]
    assert b["wait"]["release"] == "relay approve gate"
    unknown = workspace.cli("status", "gaet")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "error: no job gaet (jobs: gate)"
    assert (
        workspace.cli("status", "gate/zz").stderr.strip() == "error: no task gate/zz (jobs: gate)"
    )
    assert task_state(workspace.store(), "gate/a") == "SUCCEEDED"
    assert task_state(workspace.store(), "gate/b") == "DRAFT"


def test_run_wait_keeps_going_until_the_operator_approves(workspace: Workspace) -> None:
    workspace.submit(gated_job())
    engine = workspace.popen("run", "--until-idle", "--wait", "--quiet")
    try:
        store = workspace.store()
        wait_for(lambda: task_state(store, "gate/a") == "SUCCEEDED", what="wave 1 done")
        assert engine.poll() is None  # a wave awaiting approval keeps --wait running
        assert workspace.cli("approve", "gate").returncode == 0
        code = engine.wait(timeout=60)
        assert code == 0, workspace.cli("status").stdout + workspace.cli("events").stdout
    finally:
        kill_quietly(engine.pid)
    assert task_state(store, "gate/b") == "SUCCEEDED"


def test_run_until_idle_does_not_wait_for_an_agent_that_cannot_log_in(
    workspace: Workspace,
) -> None:
    replay = [sys.executable, str(Path(__file__).parents[1] / "replay_cli.py")]
    env = {"REPLAY_CLI": "claude", "REPLAY_SCENARIO": "claude-not-logged-in"}
    workspace.configure(agents=[{"id": "cm", "provider": "claude", "command": replay, "env": env}])
    workspace.submit(job_toml("j", [{"id": "t"}]))

    result = workspace.cli("run", "--until-idle", "--quiet", timeout=60)

    assert result.returncode == 3, result.stdout + result.stderr
    assert "task j/t waits for" in result.stdout
    assert "relay agents reset cm" in result.stdout


@pytest.mark.slow
def test_cancel_and_retry_from_another_process_while_relay_runs(
    workspace: Workspace, tmp_path: Path
) -> None:
    grandchild_file = tmp_path / "grandchild.pid"
    script = sim(duration=30, lines=30, spawn_grandchild=True)
    script["grandchild_pid_file"] = str(grandchild_file)
    workspace.submit(job_toml("cx", [{"id": "long", "sim": script}]))
    store = workspace.store()
    key = "cx/long"
    groups: list[tuple[int, int]] = []  # (agent pid, grandchild pid) per run

    def started_run() -> None:
        wait_for(grandchild_file.exists, what="the grandchild to start")
        wait_for(lambda: task_state(store, key) == "RUNNING", what="the task to run")
        agent = next(e.pid for e in executions(store) if e.task_key == key and not e.ended_at)
        groups.append((agent or 0, int(grandchild_file.read_text())))
        grandchild_file.unlink()

    engine = workspace.popen("run")
    try:
        started_run()
        cancel = workspace.cli("cancel", key)
        assert (cancel.returncode, cancel.stdout.strip()) == (0, f"cancelled {key}"), cancel.stderr
        assert task_state(store, key) == "CANCELLED"
        wait_for(lambda: all(pid_gone(pid) for pid in groups[0]), what="the group to die")

        again = workspace.cli("cancel", key)
        assert again.returncode == 1
        assert f"cancel refused: task {key} is already CANCELLED" in again.stderr

        retry = workspace.cli("retry", key)
        assert (retry.returncode, retry.stdout.strip()) == (0, f"retried {key}")
        started_run()
        engine.send_signal(signal.SIGINT)  # Ctrl-C releases the running agent: a clean exit
        assert engine.wait(20) == 0
    finally:
        stop_process(engine)
        for pids in groups:
            for pid in pids:
                kill_quietly(pid)
    assert all(pid_gone(pid) for pid in groups[1])
    report = workspace.status()
    assert [(t["state"], t["attempt"]) for t in report["tasks"]] == [("QUEUED", 1)]
    assert [j["state"] for j in report["jobs"]] == ["ACTIVE"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("cancel", "no-slash"), 2, "'no-slash' is not a task address; write it as JOB/TASK"),
        (("cancel", "nojob/x"), 1, "cancel refused: no task nojob/x"),
        (("retry", "nojob/x"), 1, "retry refused: no task nojob/x"),
    ],
)
def test_commands_on_unknown_tasks_say_why(
    sqlite_workspace: Workspace, args: tuple[str, ...], code: int, message: str
) -> None:
    result = sqlite_workspace.cli(*args)
    assert result.returncode == code
    assert message in result.stderr


@pytest.mark.parametrize(
    "command", [["status"], ["events"], ["cancel", "j/t"], ["run", "--until-idle"], ["usage"]]
)
def test_db_naming_a_missing_sqlite_file_is_refused_by_every_command(
    sqlite_workspace: Workspace, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "typo" / "relay.db"
    url = f"sqlite:///{missing}"

    result = sqlite_workspace.cli("--db", url, *command)

    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: --db {url}: no database file at {missing} (a typo would otherwise open an "
        "empty new database; pass --create to make one)"
    )
    assert not missing.exists()


def test_db_create_and_init_make_the_missing_sqlite_file(
    sqlite_workspace: Workspace, tmp_path: Path
) -> None:
    made, initialised = tmp_path / "made.db", tmp_path / "initialised.db"
    assert sqlite_workspace.cli("--db", f"sqlite:///{made}", "--create", "status").returncode == 0
    assert sqlite_workspace.cli("--db", f"sqlite:///{initialised}", "init").returncode == 0
    assert made.exists() and initialised.exists()


def test_init_makes_the_database_relay_db_names_not_a_second_file(
    sqlite_workspace: Workspace, tmp_path: Path
) -> None:
    """Every other command uses ``RELAY_DB``; init made the workspace's own SQLite file."""
    shared = tmp_path / "shared.db"
    env = cli_env() | {"RELAY_DB": f"sqlite:///{shared}"}
    argv = sqlite_workspace.cli_argv("init")
    assert subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 0
    assert shared.exists()
    assert not (sqlite_workspace.path / ".relay" / "relay.db").exists()


def test_run_says_on_stderr_which_agent_cannot_start(workspace: Workspace, tmp_path: Path) -> None:
    absent = str(tmp_path / "bin" / "codex")
    workspace.configure(agents=[{"id": "cx", "provider": "codex", "command": [absent]}])
    workspace.submit(job_toml("j", [{"id": "t"}]))

    result = workspace.cli("run", "--until-idle", "--quiet")

    assert result.returncode == 3, result.stdout + result.stderr
    assert f"agent cx cannot start: executable '{absent}' not found" in result.stderr
    assert "fix: " in result.stderr
