"""What a planned job needs next, from a few facts about its rounds and tasks.

Pure: :mod:`relay_engine.ops.plans` gathers the facts, :mod:`relay_engine.loop.rounds`
acts on the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay_engine.core.states import JobState, PlanState


@dataclass(frozen=True)
class JobFacts:
    """What decides a planned job's next step."""

    state: str
    rounds: int
    max_rounds: int
    latest_status: str | None
    latest_objective: str | None
    children_stored: bool
    active_tasks: int  # queued, running, parked, or draft and not blocked


def next_step(facts: JobFacts) -> str:
    """One of: wait, start-initial, materialise, continue, succeed, fail, exhausted."""
    if facts.state != JobState.ACTIVE:
        return "wait"
    if facts.latest_status is None:
        return "start-initial"
    if facts.latest_status == PlanState.PLANNING:
        return "wait"
    if facts.latest_status == PlanState.FAILED:
        return "fail"
    if facts.latest_status == PlanState.SUCCEEDED and not facts.children_stored:
        return "materialise"
    if facts.active_tasks:
        return "wait"
    if facts.latest_objective == "satisfied":
        return "succeed"
    if facts.rounds >= facts.max_rounds:
        return "exhausted"
    return "continue"
