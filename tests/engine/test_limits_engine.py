"""Provider usage limits end to end: real agent processes print each CLI's limit message.

An agent's ``provider`` picks the output parser and names the provider whose limit is
tracked; its ``command`` runs the sim agent speaking that provider's output format.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

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
    task_state,
    tasks,
    wait_for,
)
from sqlmodel import select

from relay_engine.contracts.config import load_config
from relay_engine.contracts.job_file import load_job_file
from relay_engine.core.limits import MIN_WAIT_S
from relay_engine.ops.commands import Pin
from relay_engine.ops.jobs import submit_job
from relay_engine.store.schema import Assignment, Command

RESET_S = 8  # the reset is this far ahead: long enough to look at the parked state, even
# on a loaded machine (the checks read `relay status --json`, a subprocess)


def sim_agent(agent_id: str, provider: str, roles: list[str], **extra: Any) -> dict[str, Any]:
    """An agent of ``provider`` whose CLI is the sim speaking that provider's output."""
    fmt = provider if provider in ("claude", "codex", "gemini") else "plain"
    command = [sys.executable, "-m", "relay_engine.agents.sim_agent", "--format", fmt]
    return {"id": agent_id, "provider": provider, "roles": roles, "command": command, **extra}


def limit_message(provider: str, until: float) -> str:
    """The limit message each real CLI prints; codex and gemini say "in RESET_S seconds"."""
    if provider == "claude":
        return f"Claude AI usage limit reached|{int(until)}"
    if provider == "codex":
        return (
            "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
            f"or try again in {RESET_S} seconds."
        )
    return (
        "429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Generate Content API "
        f"requests per minute'. Please retry in {RESET_S}s."
    )


def rate_limit_until(provider: str) -> float:
    """Claude states the reset as an epoch; the others as a delay from when it is read."""
    now = time.time()
    return float(int(now) + RESET_S + 1) if provider == "claude" else now + RESET_S


def submit_now(workspace: Workspace, text: str) -> None:
    """Submit in-process: a limit's reset is counted from here, so no CLI start-up delay."""
    path = workspace.write_job(text)
    spec = load_job_file(path, known_roles=load_config(workspace.path).roles)
    submit_job(workspace.store(), spec, now=time.time())


def event_index(store: Any, kind: str, key: str) -> list[int]:
    return [e.id or 0 for e in events(store, kind) if e.task_key == key]


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["claude", "codex", "gemini"])
def test_limit_parks_the_task_and_the_provider_until_the_reset(
    workspace: Workspace, provider: str
) -> None:
    workspace.configure(capacity=1, agents=[sim_agent("solo", provider, ["implementer"])])
    until = rate_limit_until(provider)
    limited_script = sim(
        0.1, rate_limit={"message": limit_message(provider, until), "until_epoch": until}
    )
    submit_now(
        workspace,
        job_toml(
            "lim",
            [
                # max_attempts = 1: a limit that spent the attempt would fail the task
                {"id": "hit", "priority": "P0", "max_attempts": 1, "sim": limited_script},
                {"id": "next", "priority": "P1", "sim": sim(0.1)},
            ],
        ),
    )
    store = workspace.store()
    with running_engine(workspace.engine()):
        hit = wait_for(
            lambda: (t := tasks(store)["lim/hit"]).state == "PARKED" and t, what="hit parked"
        )
        wait_for(lambda: task_state(store, "lim/next") == "PARKED", what="next parked")
        status = workspace.status()
        seen_at = time.time()
        reset = hit.not_before
        assert hit.waiting_on_provider == provider
        assert hit.attempt == 0  # the limited run is refunded
        if provider == "claude":  # the epoch it stated, unless read too late for it to stand
            assert reset == until or until < reset <= seen_at + MIN_WAIT_S
        else:
            assert until <= reset <= seen_at + RESET_S + 1
        assert seen_at < reset, "setup too slow: the reset passed before the checks"
        limits = {p["provider"]: p for p in status["providers"]}
        assert limits[provider]["status"] == "limited"
        assert limits[provider]["reset_at"] == pytest.approx(reset)
        by_key = {t["key"]: t for t in status["tasks"]}
        assert by_key["lim/next"]["waiting_on_provider"] == provider
        # parked before launch: the second task never started an agent into the limit
        assert [e for e in executions(store) if e.task_key == "lim/next"] == []
        parked_next = [e for e in events(store, "task.parked") if e.task_key == "lim/next"]
        assert parked_next and "before launch" in parked_next[0].message
        wait_for(lambda: jobs(store)["lim"].state != "ACTIVE", timeout=30, what="job done")

    final = tasks(store)
    assert {k: t.state for k, t in final.items()} == {
        "lim/hit": "SUCCEEDED",
        "lim/next": "SUCCEEDED",
    }
    assert final["lim/hit"].attempt == 1
    assert jobs(store)["lim"].state == "SUCCEEDED"
    runs = sorted(executions(store), key=lambda e: e.started_at or 0)
    assert [(e.task_key, e.outcome) for e in runs] == [
        ("lim/hit", "limited"),
        ("lim/hit", "succeeded"),
        ("lim/next", "succeeded"),
    ]
    # nothing launched on the limited provider before its reset
    assert all(e.started_at is not None and e.started_at >= reset for e in runs[1:])
    assert all(e.provider == provider for e in runs)
    for key in ("lim/hit", "lim/next"):
        (resumed,) = event_index(store, "task.resumed", key)
        (succeeded,) = event_index(store, "task.succeeded", key)
        assert event_index(store, "task.parked", key)[0] < resumed < succeeded
    recovered = events(store, "provider.recovered")
    assert [e.data["provider"] for e in recovered if e.data] == [provider]


def test_limit_swaps_to_another_provider_without_spending_the_attempt(
    workspace: Workspace,
) -> None:
    until = time.time() + 120
    limited = {
        "duration": 0.1,
        "lines": 1,
        "rate_limit": {
            "message": f"Claude AI usage limit reached|{int(until)}",
            "until_epoch": until,
        },
    }
    # The task has no sim script, so each agent's own RELAY_SIM_SCRIPT decides how it behaves.
    workspace.configure(
        agents=[
            sim_agent(
                "claude-a", "claude", ["implementer"], env={"RELAY_SIM_SCRIPT": json.dumps(limited)}
            ),
            sim_agent(
                "codex-b", "codex", ["implementer"], env={"RELAY_SIM_SCRIPT": json.dumps(sim(0.1))}
            ),
        ]
    )
    workspace.submit(job_toml("swap", [{"id": "t", "max_attempts": 1}]))
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True

    task = tasks(store)["swap/t"]
    assert (task.state, task.agent, task.provider, task.attempt) == (
        "SUCCEEDED",
        "codex-b",
        "codex",
        1,
    )
    runs = sorted(executions(store), key=lambda e: e.started_at or 0)
    assert [(e.agent, e.outcome) for e in runs] == [
        ("claude-a", "limited"),
        ("codex-b", "succeeded"),
    ]
    (swapped,) = events(store, "task.swapped")
    assert swapped.data == {"provider": "claude", "from": "claude-a"}
    assert swapped.message.startswith("swap/t moved off claude-a, claude limited: ")
    assert "{" not in swapped.message  # the CLI's sentence, not the JSON event it came in
    (started,) = [e for e in events(store, "task.started") if e.id and e.id > (swapped.id or 0)]
    assert "codex-b" in started.message
    assert events(store, "task.parked") == []
    limits = {p["provider"]: p for p in workspace.status()["providers"]}
    assert limits["claude"]["status"] == "limited"
    assert limits["claude"]["reset_at"] == int(until)


@pytest.mark.slow
def test_resumed_task_dispatches_before_work_queued_earlier(workspace: Workspace) -> None:
    until = float(int(time.time()) + 6)
    workspace.configure(
        capacity=1,
        agents=[
            sim_agent("claude-a", "claude", ["implementer"]),
            sim_agent("tester", "sim", ["tester"]),
        ],
    )
    tester = {"role": "tester", "priority": "P1"}
    submit_now(
        workspace,
        job_toml(
            "order",
            [
                {
                    "id": "p",
                    "priority": "P0",
                    "sim": sim(
                        0.1,
                        rate_limit={
                            "message": f"Claude AI usage limit reached|{int(until)}",
                            "until_epoch": until,
                        },
                    ),
                },
                # holds the only slot until after p's provider has reset
                {"id": "long", **tester, "sim": sim(until - time.time() + 2.0, lines=2)},
                {"id": "q1", **tester, "sim": sim(0.1)},
                {"id": "q2", **tester, "sim": sim(0.1)},
            ],
        ),
    )
    store = workspace.store()
    assert run_until_idle(workspace.engine()) is True

    started = [e.task_key for e in events(store, "task.started")]
    assert started == ["order/p", "order/long", "order/p", "order/q1", "order/q2"]
    (resumed,) = event_index(store, "task.resumed", "order/p")
    long_done = event_index(store, "task.succeeded", "order/long")[0]
    assert resumed < long_done  # p was back in the queue while q1 and q2 waited there too
    assert tasks(store)["order/p"].attempt == 1


def test_pinned_workstream_keeps_its_agent(workspace: Workspace) -> None:
    workspace.configure(
        agents=[
            sim_agent("sim-a", "sim", ["implementer"]),
            sim_agent("sim-b", "sim", ["implementer"]),
        ]
    )
    work = {"workstream": "ui", "sim": sim(0.1)}
    workspace.submit(
        job_toml(
            "pin",
            [
                {"id": "t1", **work},
                {"id": "t2", **work, "dependencies": ["t1"]},
                {"id": "t3", **work},
            ],
        )
    )
    store = workspace.store()
    engine = workspace.engine()
    command_id = engine.submit(Pin(job="pin", workstream="ui", role="implementer", agent="sim-b"))
    with running_engine(engine):

        def applied() -> Command | None:
            with store.read() as session:
                command = session.exec(select(Command).where(Command.id == command_id)).first()
            return command if command is not None and command.applied_at else None

        command = wait_for(applied, what="pin command applied")
        if events(store, "command.unsupported"):
            pytest.skip(f"the engine does not support pin yet: {command.outcome}")
        assert "refused" not in (command.outcome or ""), command.outcome
        wait_for(lambda: jobs(store)["pin"].state != "ACTIVE", what="job done")

    assert jobs(store)["pin"].state == "SUCCEEDED"
    runs = executions(store)
    assert len(runs) == 3
    # without the pin, config order would have put every task on sim-a
    assert {e.agent for e in runs} == {"sim-b"}
    assert {t.agent for t in tasks(store).values()} == {"sim-b"}
    with store.read() as session:
        pins = session.exec(select(Assignment).where(Assignment.status == "active")).all()
    assert [(a.job_id, a.workstream, a.role, a.agent_id, a.executions) for a in pins] == [
        ("pin", "ui", "implementer", "sim-b", 3)
    ]
