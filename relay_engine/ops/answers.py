"""Answers relay reads: a final review's verdict and an assessor's decision.

An agent that exits 0 with an answer relay cannot use has not done its task: the attempt
fails with the reason, which the retry's prompt carries (as planner rounds do with a
rejected plan), so the model can fix its answer instead of the operator finding out later.
"""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session, col, select, update

from relay_engine.contracts.planner import AssessorResult, PlanRejected, validate_assessor_output
from relay_engine.contracts.review import ReviewResult, validate_review_output
from relay_engine.core.outcomes import Outcome, OutcomeKind
from relay_engine.store.schema import Execution, Review, Task

ANSWER_NAMES = {"review": "review answer", "assess": "assessor answer"}


def vet_answer(session: Session, task: Task, outcome: Outcome) -> Outcome:
    """The outcome as it stands, or FAILED with the reason when the answer is unusable."""
    if task.kind not in ANSWER_NAMES or outcome.kind is not OutcomeKind.SUCCEEDED:
        return outcome
    raw = outcome.data if outcome.data is not None else outcome.summary
    verdict: ReviewResult | AssessorResult | PlanRejected
    if task.kind == "review":
        final = session.exec(select(Review.id).where(Review.task_key == task.key)).first()
        if final is None:  # a review task a plan asked for is ordinary work
            return outcome
        verdict = validate_review_output(raw)
    else:
        verdict = validate_assessor_output(raw)
    if not isinstance(verdict, PlanRejected):
        return outcome
    error = f"{ANSWER_NAMES[task.kind]} rejected: {verdict.reason}"
    session.exec(
        update(Execution)
        .where(col(Execution.id) == task.execution_id)
        .values(outcome=OutcomeKind.FAILED.value, error=error)
    )
    return replace(outcome, kind=OutcomeKind.FAILED, error=error)
