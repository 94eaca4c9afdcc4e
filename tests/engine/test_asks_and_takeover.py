"""Needs you, through the engine, with the sim agent speaking claude's permission channel:
asks as durable rows answered from another process, rules from "always" answers, the
timeout clock stopped while an agent waits, take-over and hand-back, the operator's words."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    Workspace,
    events,
    init_repo,
    job_toml,
    running_engine,
    sim,
    task_state,
    tasks,
    wait_for,
)
from sqlmodel import col, select

from relay_engine.store.schema import Ask, Execution

CLAUDE_SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", "claude"]


def claude_sim(agent_id: str = "claude-sim", **extra: Any) -> dict[str, Any]:
    return {"id": agent_id, "provider": "claude", "command": CLAUDE_SIM, **extra}


def bash(command: str, writes: dict[str, str]) -> dict[str, Any]:
    return {"tool": "Bash", "input": {"command": command}, "writes": writes}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def open_asks(ws: Workspace) -> list[dict[str, Any]]:
    return json.loads(ws.cli("asks", "--json").stdout)


def shown(repo: Path, branch: str, name: str) -> str | None:
    done = subprocess.run(["git", "show", f"{branch}:{name}"], cwd=repo, capture_output=True,
                          text=True, check=False)  # fmt: skip
    return done.stdout if done.returncode == 0 else None


@pytest.mark.slow
def test_an_ask_waits_for_the_operator_and_the_answer_reaches_the_agent(
    workspace: Workspace, repo: Path
) -> None:
    workspace.configure(
        agents=[claude_sim()],
        permissions={"allow": ["Bash(npm test:*)"], "deny": ["Bash(rm:*)"]},
    )
    asks = [
        bash("npm test", {"tested.txt": "ok"}),
        bash("make build", {"built.txt": "ok"}),
        bash("rm -rf build", {"removed.txt": "no"}),
    ]
    task = {"id": "t", "sim": sim(0.05, asks=asks)}
    workspace.submit(job_toml("j", [task], repo=str(repo), review=False))
    store = workspace.store()
    with running_engine(workspace.engine()):
        (ask,) = wait_for(lambda: open_asks(workspace), timeout=30)
        assert (ask["task_key"], ask["summary"]) == ("j/t", "Bash make build")
        assert ask["suggested_rule"] == "Bash(make build:*)"
        status = workspace.status()
        assert [t["waiting_on_you"] for t in status["tasks"]] == [
            ["waiting on you: Bash make build"]
        ]
        answered = workspace.cli("answer", str(ask["id"]), "allow", "--always", "job")
        assert answered.returncode == 0 and "job j: allow Bash(make build:*)" in answered.stdout
        wait_for(lambda: task_state(store, "j/t") == "SUCCEEDED", timeout=30)
    assert shown(repo, "relay/j", "tested.txt") == "ok"  # allowed by a rule, never asked
    assert shown(repo, "relay/j", "built.txt") == "ok"  # asked, then allowed
    assert shown(repo, "relay/j", "removed.txt") is None  # denied by a rule
    with store.read() as session:
        (run,) = session.exec(select(Execution)).all()
        assert [d["summary"] for d in run.denials] == ["Bash rm -rf build"]
        assert session.get(Ask, ask["id"]).status == "relayed"
    assert workspace.status()["rules"] == [
        {
            "scope": "job",
            "target": "j",
            "effect": "allow",
            "rule": "Bash(make build:*)",
            "created_by": "cli",
        }
    ]


def test_an_always_answer_lets_the_next_task_run_without_asking(
    workspace: Workspace, repo: Path
) -> None:
    workspace.configure(agents=[claude_sim()])
    first = {"id": "a", "sim": sim(0.05, asks=[bash("make build", {"a.txt": "a"})])}
    second = {
        "id": "b",
        "depends_on": ["a"],
        "sim": sim(0.05, asks=[bash("make build", {"b.txt": "b"})]),
    }
    workspace.submit(job_toml("j", [first, second], repo=str(repo), review=False))
    store = workspace.store()
    with running_engine(workspace.engine()):
        (ask,) = wait_for(lambda: open_asks(workspace), timeout=30)
        assert workspace.cli("answer", str(ask["id"]), "--always", "job").returncode == 0
        wait_for(lambda: task_state(store, "j/b") == "SUCCEEDED", timeout=30)
    assert len(json.loads(workspace.cli("asks", "--json", "--all").stdout)) == 1
    assert shown(repo, "relay/j", "b.txt") == "b"


@pytest.mark.slow
def test_waiting_on_the_operator_does_not_count_against_the_timeout(
    workspace: Workspace, repo: Path
) -> None:
    workspace.configure(agents=[claude_sim()])
    task = {"id": "t", "timeout": 2, "sim": sim(0.05, asks=[bash("make", {"m.txt": "m"})])}
    workspace.submit(job_toml("j", [task], repo=str(repo), review=False))
    store = workspace.store()
    with running_engine(workspace.engine()):
        (ask,) = wait_for(lambda: open_asks(workspace), timeout=30)
        time.sleep(3)  # past the task's 2 s timeout, all of it spent waiting on the operator
        assert task_state(store, "j/t") == "RUNNING"
        workspace.cli("answer", str(ask["id"]), "deny", "--text", "use ninja")
        wait_for(lambda: task_state(store, "j/t") == "SUCCEEDED", timeout=30)
    assert shown(repo, "relay/j", "m.txt") is None
    (denied,) = events(store, "agent.denied")
    assert "use ninja" in denied.message


def test_an_agent_that_may_not_ask_is_refused_at_once(workspace: Workspace, repo: Path) -> None:
    workspace.configure(agents=[claude_sim()], permissions={"ask": "deny"})
    task = {"id": "t", "sim": sim(0.05, asks=[bash("make", {"m.txt": "m"})])}
    workspace.submit(job_toml("j", [task], repo=str(repo), review=False))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: task_state(store, "j/t") == "SUCCEEDED", timeout=30)
    assert open_asks(workspace) == [] and shown(repo, "relay/j", "m.txt") is None
    assert "nobody answers asks here" in events(store, "agent.denied")[0].message


@pytest.mark.slow
def test_a_held_task_is_claimed_by_no_engine_until_it_is_handed_back(
    workspace: Workspace, repo: Path
) -> None:
    workspace.configure(agents=[claude_sim()])
    held_then_quick = sim(30, lines=30, durations_by_attempt={"2": 10.0})  # time to hear "say"
    workspace.submit(job_toml("j", [{"id": "t", "sim": held_then_quick}], repo=str(repo),
                              review=False))  # fmt: skip
    store = workspace.store()
    with running_engine(workspace.engine()), running_engine(workspace.engine()):
        wait_for(lambda: task_state(store, "j/t") == "RUNNING", timeout=30)
        took = workspace.cli("takeover", "j/t", "--print")
        assert took.returncode == 0, took.stderr
        assert "cd " in took.stdout and ".relay/takeover/j/t.sh" in took.stdout
        wait_for(lambda: not tasks(store)["j/t"].execution_id, timeout=10)
        time.sleep(1.5)  # two engines, many ticks: neither claims a held task
        held = tasks(store)["j/t"]
        assert (held.state, held.attempt) == ("HELD", 1) and held.held_by
        retried = workspace.cli("retry", "j/t")  # only the operator's hand-back moves it
        assert retried.returncode == 1 and "is HELD" in retried.stderr
        worktree = workspace.path / ".relay" / "worktrees" / "j" / "t"
        (worktree / "by-hand.txt").write_text("typed by a person\n")
        back = workspace.cli("handback", "j/t", "--continue", "finish it")
        assert back.returncode == 0, back.stderr
        wait_for(lambda: tasks(store)["j/t"].attempt == 2, timeout=30)
        assert workspace.cli("say", "j/t", "and add a test").returncode == 0
        wait_for(lambda: task_state(store, "j/t") == "SUCCEEDED", timeout=60)
    assert shown(repo, "relay/j", "by-hand.txt") == "typed by a person\n"
    *_, last = _runs(store)  # in the order they started
    assert "finish it" in (Path(last.artifact_dir or "") / "prompt.md").read_text()
    assert shown(repo, "relay/j", "operator-said.txt") == "and add a test\n"


def _runs(store: Any) -> list[Execution]:
    with store.read() as session:
        return list(session.exec(select(Execution).order_by(col(Execution.started_at))))


def test_handing_back_done_merges_the_worktree(workspace: Workspace, repo: Path) -> None:
    workspace.configure(agents=[claude_sim()])
    tasks_ = [{"id": "t", "sim": sim(30, lines=30)}, {"id": "next", "depends_on": ["t"]}]
    workspace.submit(job_toml("j", tasks_, repo=str(repo), review=False))
    store = workspace.store()
    with running_engine(workspace.engine()):
        wait_for(lambda: task_state(store, "j/t") == "RUNNING", timeout=30)
        assert workspace.cli("takeover", "j/t", "--print").returncode == 0
        wait_for(lambda: task_state(store, "j/t") == "HELD", timeout=10)
        tree = workspace.path / ".relay" / "worktrees" / "j" / "t"
        wait_for((tree / ".git").exists, timeout=10)
        (tree / "done-by-hand.txt").write_text("done\n")
        done = workspace.cli("handback", "j/t", "--done")
        assert done.returncode == 0, done.stderr
        wait_for(lambda: task_state(store, "j/next") == "SUCCEEDED", timeout=30)
    assert task_state(store, "j/t") == "SUCCEEDED"
    assert shown(repo, "relay/j", "done-by-hand.txt") == "done\n"
