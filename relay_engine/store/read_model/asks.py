"""Asks: what agents wait on from an operator (a tool request no rule decided, or a
question) with its exact input, and the rules operators added by answering "always".

``relay asks``, ``relay status`` and the console's ask screen read these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from relay_engine.store.schema import Ask, PermissionRule


@dataclass(frozen=True, slots=True)
class AskView:
    """What an agent waits on: the tool and its exact input (or a question), and until when."""

    id: int
    job_id: str
    task_key: str | None
    execution_id: str
    agent: str
    kind: str  # permission | question
    tool: str
    tool_input: Mapping[str, Any]
    summary: str
    context: str | None
    suggested_rule: str | None
    status: str
    asked_at: float
    timeout_at: float | None
    answer: str | None = None
    answer_text: str | None = None
    answered_by: str | None = None
    rule_added: str | None = None

    @property
    def waiting(self) -> str:
        """``waiting on you: Bash npm test``, as status lines and the console put it."""
        return f"waiting on you: {self.summary}"


def read_asks(
    session: Session, *, open_only: bool = True, job_id: str | None = None
) -> list[AskView]:
    """Asks oldest first: the open ones (not yet answered), or every one."""
    query = select(Ask).order_by(col(Ask.asked_at), col(Ask.id))
    if open_only:
        query = query.where(col(Ask.status) == "open")
    if job_id is not None:
        query = query.where(col(Ask.job_id) == job_id)
    return [_ask_view(row) for row in session.exec(query)]


def _ask_view(row: Ask) -> AskView:
    return AskView(
        id=row.id or 0, job_id=row.job_id, task_key=row.task_key,
        execution_id=row.execution_id, agent=row.agent, kind=row.kind, tool=row.tool,
        tool_input=dict(row.tool_input or {}), summary=row.summary, context=row.context,
        suggested_rule=row.suggested_rule, status=row.status, asked_at=row.asked_at,
        timeout_at=row.timeout_at, answer=row.answer, answer_text=row.answer_text,
        answered_by=row.answered_by, rule_added=row.rule_added,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RuleView:
    scope: str
    target: str
    effect: str
    rule: str
    created_by: str | None


def read_added_rules(session: Session, *, job_id: str | None = None) -> list[RuleView]:
    """Rules operators added with "always" answers (for a job: its own, its tasks')."""
    query = select(PermissionRule).order_by(col(PermissionRule.id))
    rows = list(session.exec(query))
    if job_id is not None:
        rows = [r for r in rows if r.target == job_id or r.target.startswith(f"{job_id}/")]
    return [RuleView(r.scope, r.target, r.effect, r.rule, r.created_by) for r in rows]
