"""Budgets stop dispatch: per job (dollars or tokens), and per agent or provider per day."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest
from helpers import (
    Workspace,
    events,
    executions,
    job_toml,
    jobs,
    run_until_idle,
    running_engine,
    sim,
    tasks,
    wait_for,
)
from test_limits_engine import sim_agent
from test_planning_engine import plan_of, planned_job, work

from relay_engine.loop.engine import Engine

RUN_COST = 0.03


def claude_agent(**extra: object) -> dict:
    return sim_agent("claude-a", "claude", ["implementer", "planner", "troubleshooter"], **extra)


def chain(count: int, **job: object) -> str:
    """Tasks one after another (one workstream), each a $0.03 Claude run."""
    steps = [
        {"id": f"t{i}", "input": "x", "workstream": "w", "sim": sim(0.05, cost_usd=RUN_COST)}
        for i in range(count)
    ]
    return job_toml("capped", steps, **job)


@pytest.mark.slow
def test_a_spent_budget_parks_the_rest_until_raised(workspace: Workspace) -> None:
    workspace.configure(agents=[claude_agent()])
    workspace.submit(chain(5, budget_usd=0.05))
    run_until_idle(workspace.engine())
    assert len(executions(workspace.store())) == 2  # $0.03, $0.06: the third would overspend
    parked = [t for t in tasks(workspace.store()).values() if t.state == "PARKED"]
    assert len(parked) == 3
    assert {t.error for t in parked} == {"budget exhausted: $0.06 of $0.05"}
    assert [e.kind for e in events(workspace.store(), "budget.exhausted")] == ["budget.exhausted"]
    status = {j["id"]: j for j in workspace.status()["jobs"]}["capped"]
    assert status["budget"]["level"] == "exhausted"
    raised = workspace.cli("budget", "capped", "--add", "5")
    assert raised.returncode == 0, raised.stderr
    assert "3 parked tasks resumed" in raised.stdout
    assert run_until_idle(workspace.engine()) is True
    assert len(executions(workspace.store())) == 5


def test_warning_at_eighty_percent_comes_once(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    ws.configure(agents=[claude_agent()])
    ws.submit(chain(3, budget_usd=0.1))  # 30 %, 60 %, 90 %
    assert run_until_idle(ws.engine()) is True
    (warning,) = events(ws.store(), "budget.warning")
    assert "$0.09 of $0.10" in warning.message
    assert not events(ws.store(), "budget.exhausted")


def test_a_token_budget_counts_tokens(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    ws.configure(agents=[claude_agent()])
    ws.submit(chain(3, budget_tokens=1))
    run_until_idle(ws.engine())
    assert len(executions(ws.store())) == 1
    (parked, _) = [t for t in tasks(ws.store()).values() if t.state == "PARKED"]
    assert (parked.error or "").startswith("budget exhausted: ") and "tokens" in (
        parked.error or ""
    )


def test_the_planner_of_a_spent_job_waits(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    ws.configure(agents=[claude_agent()])
    costly = work("a")
    costly["sim"] = sim(0.05, cost_usd=1.0)
    planner = {"1": plan_of(costly), "2": plan_of(work("b"))}
    ws.submit(planned_job("auto", planner, budget_usd=0.5))
    run_until_idle(ws.engine())
    runs = executions(ws.store())
    assert [e.plan_id is not None for e in sorted(runs, key=lambda e: e.started_at or 0)] == [
        True,
        False,
    ]  # round 1 and task a ran; the continuation round never started
    assert events(ws.store(), "budget.exhausted")


def test_a_daily_provider_budget_resets_at_local_midnight(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    ws.configure(agents=[claude_agent()])
    text = ws.path / "relay.toml"
    text.write_text(text.read_text() + "\n[providers.claude]\ndaily_budget_usd = 0.05\n")
    ws.submit(chain(3))
    late = datetime.now().astimezone().replace(hour=23, minute=50, second=0, microsecond=0)
    shift = {"by": late.timestamp() - time.time()}  # the engine's clock runs, 23:50 onwards

    def clock() -> float:
        return time.time() + shift["by"]

    with running_engine(Engine(ws.path, store=ws.store(), clock=clock)):
        wait_for(
            lambda: [t for t in tasks(ws.store()).values() if t.state == "PARKED"],
            what="the third run to park on the provider's daily budget",
        )
    assert len(executions(ws.store())) == 2
    (parked,) = [t for t in tasks(ws.store()).values() if t.state == "PARKED"]
    assert "daily budget of provider claude exhausted: $0.06 of $0.05" in (parked.error or "")
    midnight = (late + timedelta(days=1)).replace(hour=0, minute=0)
    assert parked.not_before == pytest.approx(midnight.timestamp())
    shift["by"] = midnight.timestamp() + 60 - time.time()
    assert run_until_idle(Engine(ws.path, store=ws.store(), clock=clock)) is True
    assert len(executions(ws.store())) == 3


@pytest.mark.postgres
def test_two_engines_never_overspend_by_more_than_one_run_each(pg_url: str, tmp_path) -> None:
    ws = Workspace(tmp_path / "ws", pg_url)
    ws.path.mkdir()
    ws.configure(capacity=4, agents=[claude_agent()])
    steps = [{"id": f"t{i}", "input": "x", "sim": sim(0.2, cost_usd=RUN_COST)} for i in range(20)]
    ws.submit(job_toml("race", steps, budget_usd=0.1))
    engines = [ws.engine(), ws.engine()]
    threads = [threading.Thread(target=e.run, kwargs={"until_idle": True}) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    spent = sum(e.cost_usd or 0 for e in executions(ws.store()))
    # claims re-check the budget in their transaction: beyond $0.10 only runs already
    # started by then can land, at most each engine's slots
    assert spent <= 0.1 + 2 * 4 * RUN_COST
    assert any(t.state == "PARKED" for t in tasks(ws.store()).values())
    ws.close()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--add", "-5"], "“-5” is not an amount of dollars: type a number such as 5 or 2.50."),
        (["--add", "nan"], "“nan” is not an amount of dollars"),
        (["--add", "50000"], "$50,000.00 is more than $10,000 at once: raise it in steps"),
        (["--tokens", "1" + "0" * 20], "tokens is more than 1,000,000,000,000 at once"),
        (["--tokens", "0"], "Type a positive number of tokens: a budget is raised, never lowered"),
    ],
)
def test_a_budget_is_never_lowered_or_lost_by_what_is_typed(
    sqlite_workspace: Workspace, flags: list[str], said: str
) -> None:
    """``--add nan`` or 10**20 tokens made the budget NULL (no budget at all) when stored;
    the CLI now says what the console's budget dialog says."""
    ws = sqlite_workspace
    ws.submit(chain(1, budget_usd=0.05, budget_tokens=1000))
    raised = ws.cli("budget", "capped", *flags)
    assert raised.returncode == 2
    assert said in raised.stderr
    job = jobs(ws.store())["capped"]
    assert (job.budget_usd, job.budget_tokens) == (0.05, 1000)
    assert ws.cli("budget", "capped", "--tokens", "1,000").returncode == 0
    assert jobs(ws.store())["capped"].budget_tokens == 2000
