"""Two logins of one provider, and limits seen before the wall.

The agents are the sim speaking claude's stream (a real process per run), so the engine
parses exactly what claude prints: ``rate_limit_event`` lines with the plan's window and
utilization, and the limit result a spent window ends with.
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
    run_until_idle,
    running_engine,
    sim,
    tasks,
    wait_for,
)

from relay_engine.contracts.config import load_config
from relay_engine.core.quota import clock
from relay_engine.store.read_model.providers import read_quota

SIM = [sys.executable, "-m", "relay_engine.agents.sim_agent"]


def agent(agent_id: str, provider: str, account: str | None, **extra: Any) -> dict[str, Any]:
    """An agent of ``provider`` whose CLI is the sim speaking that provider's stream."""
    fmt = provider if provider in ("claude", "codex", "gemini") else "plain"
    entry = {"id": agent_id, "provider": provider, "command": [*SIM, "--format", fmt], **extra}
    return {**entry, "account": account} if account else entry


def warning(utilization: float, resets_at: float) -> dict[str, Any]:
    """What claude prints on a subscription past the five-hour window's warning threshold."""
    info = {"status": "allowed_warning", "resetsAt": int(resets_at), "rateLimitType": "five_hour",
            "utilization": utilization, "isUsingOverage": False, "surpassedThreshold": 0.9}  # fmt: skip
    return {"type": "rate_limit_event", "rate_limit_info": info, "session_id": "s"}


def ran_on(store: Any) -> dict[str, str]:
    return {e.task_key: e.agent for e in executions(store) if e.outcome == "succeeded"}


def agents_json(workspace: Workspace) -> dict[str, dict[str, Any]]:
    listed = workspace.cli("agents", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["id"]: row for row in json.loads(listed.stdout)}


def test_a_warning_at_96_percent_stops_new_work_on_that_account_and_the_other_takes_it(
    workspace: Workspace,
) -> None:
    resets = time.time() + 3600
    workspace.configure(
        agents=[agent("claude-work", "claude", "work"), agent("claude-home", "claude", "home")]
    )
    first = sim(0.5, emit=[warning(0.96, resets)])
    workspace.submit(
        job_toml(
            "q",
            [
                {"id": "first", "sim": first},
                {"id": "second", "dependencies": ["first"], "sim": sim(0.1)},
                {"id": "third", "dependencies": ["first"], "sim": sim(0.1)},
            ],
        )
    )
    store = workspace.store()
    assert run_until_idle(workspace.engine(), timeout=120)
    # the run that crossed the watermark finished; nothing new started on its account
    assert ran_on(store) == {"q/first": "claude-work", "q/second": "claude-home",
                             "q/third": "claude-home"}  # fmt: skip
    assert {t.state for t in tasks(store).values()} == {"SUCCEEDED"}
    reason = f"claude/work at 96% of its five-hour window until {clock(resets, time.time())}"
    (said,) = events(store, "provider.quota")
    assert said.message == f"{reason}: no new task starts on it until then"
    work = agents_json(workspace)["claude-work"]
    assert (work["account"], work["status"], work["reason"]) == ("work", "quota", reason)
    assert agents_json(workspace)["claude-home"]["status"] == "ready"
    with store.read() as session:
        (gauge,) = read_quota(session, load_config(workspace.path), time.time())
    assert (gauge.key, gauge.label, gauge.utilization, gauge.holding) == (
        "claude/work", "five-hour", 0.96, True,
    )  # fmt: skip
    assert gauge.resets_at == int(resets) and gauge.stop_at == 0.95


def test_the_only_account_over_its_watermark_parks_new_work_until_the_window_resets(
    workspace: Workspace,
) -> None:
    workspace.configure(agents=[agent("claude-work", "claude", "work")])
    resets = time.time() + 8
    workspace.submit(
        job_toml(
            "p",
            [
                {"id": "first", "sim": sim(0.1, emit=[warning(0.97, resets)])},
                {"id": "second", "dependencies": ["first"], "sim": sim(0.1)},
            ],
        )
    )
    store = workspace.store()
    with running_engine(workspace.engine()):
        parked = wait_for(
            lambda: (t := tasks(store)["p/second"]).state == "PARKED" and t, timeout=60
        )
        assert parked.waiting_on_provider == "claude/work"
        assert parked.not_before == int(resets)
        assert parked.error is None or "quota" not in parked.error
        (park,) = [e for e in events(store, "task.parked") if e.task_key == "p/second"]
        assert "claude/work at 97% of its five-hour window until" in park.message
        assert "no other account or provider can take it" in park.message
        wait_for(lambda: tasks(store)["p/second"].state == "SUCCEEDED", timeout=60)
    second = [e for e in executions(store) if e.task_key == "p/second"]
    assert [e.outcome for e in second] == ["succeeded"]
    assert second[0].started_at is not None and second[0].started_at >= int(resets)


@pytest.mark.parametrize("stop_at", [0.99])
def test_a_higher_stop_at_lets_the_account_keep_working(
    workspace: Workspace, stop_at: float
) -> None:
    workspace.configure(
        agents=[agent("claude-work", "claude", "work"), agent("claude-home", "claude", "home")]
    )
    config = (workspace.path / "relay.toml").read_text()
    (workspace.path / "relay.toml").write_text(
        config + f"\n[providers.claude.accounts.work]\nstop_at = {stop_at}\n"
    )
    first = sim(0.1, emit=[warning(0.96, time.time() + 3600)])
    workspace.submit(
        job_toml("h", [{"id": "first", "sim": first},
                       {"id": "second", "dependencies": ["first"], "sim": sim(0.1)}])
    )  # fmt: skip
    store = workspace.store()
    assert run_until_idle(workspace.engine(), timeout=120)
    assert ran_on(store) == {"h/first": "claude-work", "h/second": "claude-work"}
    assert events(store, "provider.quota") == []


def test_a_limit_on_one_account_moves_work_to_the_providers_next_account_first(
    workspace: Workspace,
) -> None:
    until = time.time() + 600
    limited = sim(0.1, rate_limit={"message": f"Claude AI usage limit reached|{int(until)}",
                                   "until_epoch": until})  # fmt: skip
    workspace.configure(
        agents=[
            agent("claude-work", "claude", "work", env={"RELAY_SIM_SCRIPT": json.dumps(limited)}),
            agent("codex-main", "codex", None),  # listed before the other claude account
            agent("claude-home", "claude", "home"),
        ]
    )
    workspace.submit(
        job_toml(
            "l",
            [
                {"id": "hit", "agent": "claude-work", "max_attempts": 1},
                {"id": "after", "dependencies": ["hit"], "sim": sim(0.1)},
            ],
        )
    )
    store = workspace.store()
    assert run_until_idle(workspace.engine(), timeout=120)
    final = tasks(store)
    assert (final["l/hit"].state, final["l/hit"].agent, final["l/hit"].attempt) == (
        "SUCCEEDED", "claude-home", 1,
    )  # fmt: skip
    (swapped,) = events(store, "task.swapped")
    assert swapped.data == {"provider": "claude/work", "from": "claude-work"}
    assert "moved off claude-work, claude/work limited" in swapped.message
    limits = {(p["provider"], p["account"]): p for p in workspace.status()["providers"]}
    assert limits["claude", "work"]["status"] == "limited"
    assert limits["claude", "work"]["reset_at"] == int(until)
    assert ("claude", "home") not in limits and ("claude", "") not in limits
    rows = agents_json(workspace)
    assert rows["claude-work"]["status"] == "limited"
    assert rows["claude-home"]["status"] == rows["codex-main"]["status"] == "ready"
    # the limited account's own work still goes elsewhere; the other account kept working
    assert final["l/after"].state == "SUCCEEDED"
    assert final["l/after"].agent in ("claude-home", "codex-main")


REPLAY = [sys.executable, str(Path(__file__).resolve().parents[1] / "replay_cli.py")]
CLAUDE_SUCCESS = (
    Path(__file__).resolve().parents[1] / "fixtures" / "streams" / "claude_success.jsonl"
)


def test_a_login_belongs_to_its_account_so_its_other_agents_are_not_tried(
    workspace: Workspace,
) -> None:
    """Two agents of claude/work share one config directory: when one is not logged in the
    other is not either, and the task goes to an agent with a login of its own."""
    logged_out = {"REPLAY_CLI": "claude", "REPLAY_SCENARIO": "claude-not-logged-in"}
    could_work = {"REPLAY_CLI": "claude", "REPLAY_SUCCESS": str(CLAUDE_SUCCESS)}
    worker = {"id": "worker", "provider": "command",
              "command": [sys.executable, "-c", "print('done')"]}  # fmt: skip
    workspace.configure(agents=[
        {"id": "work-a", "provider": "claude", "account": "work", "command": REPLAY, "env": logged_out},
        {"id": "work-b", "provider": "claude", "account": "work", "command": REPLAY, "env": could_work},
        worker,
    ])  # fmt: skip
    workspace.submit(job_toml("s", [{"id": "t", "max_attempts": 1}]))
    store = workspace.store()
    assert run_until_idle(workspace.engine(), timeout=120)
    task = tasks(store)["s/t"]
    assert (task.state, task.agent, task.attempt) == ("SUCCEEDED", "worker", 1)
    assert {e.agent for e in executions(store)} == {"work-a", "worker"}  # work-b never tried
    rows = agents_json(workspace)
    assert rows["work-b"]["status"] == "auth" and rows["work-b"]["login"] == "not logged in"
    assert (
        rows["work-a"]["reason"] == rows["work-b"]["reason"] == "Not logged in · Please run /login"
    )


def test_an_accounts_daily_budget_holds_that_account_only(workspace: Workspace) -> None:
    workspace.configure(
        agents=[agent("claude-work", "claude", "work"), agent("claude-home", "claude", "home")]
    )
    config = (workspace.path / "relay.toml").read_text()
    (workspace.path / "relay.toml").write_text(
        config + "\n[providers.claude.accounts.work]\ndaily_budget_usd = 0.01\n"
    )
    workspace.submit(
        job_toml("b", [{"id": "first", "sim": sim(0.1, cost_usd=0.02)},
                       {"id": "second", "dependencies": ["first"], "sim": sim(0.1)}])
    )  # fmt: skip
    store = workspace.store()
    assert run_until_idle(workspace.engine(), timeout=120)
    assert ran_on(store) == {"b/first": "claude-work", "b/second": "claude-home"}
    assert {e.account for e in executions(store)} == {"work", "home"}
    work = agents_json(workspace)["claude-work"]
    assert work["status"] == "budget"
    assert "daily budget of account claude/work exhausted: $0.02 of $0.01" in work["reason"]
