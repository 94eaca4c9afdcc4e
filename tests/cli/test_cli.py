"""The ``relay`` command as an operator uses it: submit, run, status, cancel, retry."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import (
    Workspace,
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
def test_run_until_idle_exits_1_when_a_job_fails_and_shows_what_is_blocked(
    workspace: Workspace,
) -> None:
    definitions = [
        {"id": "broken", "max_attempts": 2, "sim": sim(fail_attempts=9)},
        {"id": "next", "depends_on": ["broken"], "sim": sim()},
        {"id": "fine", "sim": sim()},
    ]
    workspace.submit(job_toml("bad", definitions))

    result = workspace.cli("run", "--until-idle")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "job bad failed: 1 failed, 0 cancelled, 1 blocked" in result.stdout
    assert "blocked by broken" in result.stdout
    report = workspace.status()
    assert [j["state"] for j in report["jobs"]] == ["FAILED"]
    by_id = {t["id"]: t for t in report["tasks"]}
    assert (by_id["broken"]["state"], by_id["broken"]["attempt"]) == ("FAILED", 2)
    assert (by_id["next"]["state"], by_id["next"]["blocked_by"]) == ("DRAFT", "broken")
    assert by_id["fine"]["state"] == "SUCCEEDED"


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
