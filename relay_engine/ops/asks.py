"""Asks: the tool requests and questions of agents that no rule decided, as rows any
console or CLI answers, and the rules an "always" answer adds.

The engine running the agent opens an ask when its CLI asks (:func:`open_ask`), and hands
the answer to the CLI once someone gave it; an ask nobody answers in time is denied so the
agent goes on. Answering only changes rows, so it works from any host on the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import or_
from sqlmodel import Session, col, select

from relay_engine.contracts.rules import Rule, parse_rule
from relay_engine.contracts.time_format import format_time
from relay_engine.core.permissions import Request, describe, question_text, suggested_rule
from relay_engine.ops.refusals import Refused
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Ask, PermissionRule

Scope = Literal["task", "job", "agent"]
OPEN, ANSWERED, RELAYED, EXPIRED, CANCELLED = "open", "answered", "relayed", "expired", "cancelled"


@dataclass(frozen=True)
class Asker:
    """Who asks: the run, and the task and agent it belongs to."""

    job_id: str
    task_key: str | None
    execution_id: str
    engine_id: str
    agent: str
    provider: str


def open_ask(
    session: Session,
    asker: Asker,
    request: Request,
    *,
    kind: str,
    request_id: str,
    context: str | None,
    timeout_s: float,
    now: float,
) -> Ask:
    """Record what the agent waits on and say so (event ``agent.needs_input``)."""
    summary = describe(request)
    ask = Ask(
        job_id=asker.job_id,
        task_key=asker.task_key,
        execution_id=asker.execution_id,
        engine_id=asker.engine_id,
        agent=asker.agent,
        provider=asker.provider,
        kind=kind,
        request_id=request_id,
        tool=request.tool,
        tool_input=dict(request.input),
        summary=summary[:2000],
        context=(context or "")[-4000:] or None,
        suggested_rule=None if kind == "question" else str(suggested_rule(request)),
        asked_at=now,
        timeout_at=now + timeout_s,
    )
    session.add(ask)
    session.flush()
    who = asker.task_key or f"job {asker.job_id}"
    message = f"{who} waits on you: {summary}"
    _ask_event(
        session, ask, EventKind.AGENT_NEEDS_INPUT, "warning", message, now,
        agent=asker.agent, tool=request.tool, summary=summary,
    )  # fmt: skip
    return ask


def _ask_event(
    session: Session, ask: Ask, kind: EventKind, level: str, message: str, now: float, **data: Any
) -> None:
    """An ask's events (opened, answered, expired) say alike whom they are about: the ask's
    task and job, which consoles re-read on an event, and the ask itself, first in the data,
    as a task may wait on more than one."""
    record_event(
        session, kind, message[:500], now=now, job_id=ask.job_id, task_key=ask.task_key,
        level=level, data={"ask": ask.id, **data},
    )  # fmt: skip


def find_ask(session: Session, ask_id: int) -> Ask:
    ask = session.get(Ask, ask_id)
    if ask is None:
        raise Refused(f"no ask {ask_id}")
    return ask


def answer_ask(
    session: Session,
    ask: Ask,
    answer: Literal["allow", "deny", "answer"],
    now: float,
    *,
    text: str | None = None,
    always: Scope | None = None,
    by: str = "operator",
) -> str:
    """The operator's answer; the engine running the agent hands it over on its next tick.
    ``always`` also adds the rule the request needed (or its denial) for that scope."""
    if ask.status != OPEN:
        raise Refused(f"ask {ask.id} is already {ask.status}")
    if ask.kind == "question" and answer == "allow" and not text:
        raise Refused(f"ask {ask.id} is a question: answer it with --text")
    if ask.kind == "question" and text:
        answer = "answer"
    if always is not None:
        ask.rule_added = _add_rule(session, ask, answer, always, by, now)
    ask.status, ask.answer, ask.answered_by, ask.answered_at = ANSWERED, answer, by, now
    ask.answer_text = text or (f"The operator refused: {ask.summary}" if answer == "deny" else None)
    session.add(ask)
    said = {"allow": "allowed", "deny": "denied", "answer": "answered"}[answer]
    rule = f" (and always, for the {always}: {ask.rule_added})" if ask.rule_added else ""
    message = f"{ask.task_key or ask.job_id}: {said} {ask.summary}{rule}"
    _ask_event(session, ask, EventKind.ASK_ANSWERED, "info", message, now, answer=answer, by=by)
    return f"ask {ask.id} {said}: {ask.summary}{rule}"


def _add_rule(session: Session, ask: Ask, answer: str, scope: Scope, by: str, now: float) -> str:
    if ask.kind == "question" or not ask.suggested_rule:
        raise Refused(f"ask {ask.id} is a question: there is no rule to add for it")
    target = {"task": ask.task_key, "job": ask.job_id, "agent": ask.agent}[scope]
    if not target:
        raise Refused(f"ask {ask.id} has no {scope} to add a rule for")
    effect = "deny" if answer == "deny" else "allow"
    rule = PermissionRule(
        scope=scope, target=target, effect=effect, rule=ask.suggested_rule, ask_id=ask.id,
        created_by=by, created_at=now,
    )  # fmt: skip
    session.add(rule)
    return f"{scope} {target}: {effect} {ask.suggested_rule}"


def rule_to_add(ask: Ask) -> str:
    """What ``--always`` would add, shown before it is added."""
    return ask.suggested_rule or "no rule: a question is answered once"


def every_rule(session: Session) -> list[PermissionRule]:
    """Every rule operators added, read once for a batch of starts (see :func:`rules_of`)."""
    return list(session.exec(select(PermissionRule)))


def rules_of(
    rows: list[PermissionRule], *, task_key: str | None, job_id: str, agent: str
) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(allow, deny) of ``rows`` that apply to this task, its job or its agent."""
    targets = {("task", task_key), ("job", job_id), ("agent", agent)}
    mine = [r for r in rows if (r.scope, r.target) in targets and r.target]
    allow = tuple(parse_rule(r.rule) for r in mine if r.effect == "allow")
    deny = tuple(parse_rule(r.rule) for r in mine if r.effect == "deny")
    return allow, deny


def added_rules(
    session: Session, *, task_key: str | None, job_id: str, agent: str
) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(allow, deny) rules operators added for this task, its job or its agent."""
    targets = [("task", task_key), ("job", job_id), ("agent", agent)]
    query = select(PermissionRule).where(
        or_(
            *(
                (col(PermissionRule.scope) == scope) & (col(PermissionRule.target) == target)
                for scope, target in targets
                if target
            )
        )
    )
    rows = list(session.exec(query))
    allow = tuple(parse_rule(r.rule) for r in rows if r.effect == "allow")
    deny = tuple(parse_rule(r.rule) for r in rows if r.effect == "deny")
    return allow, deny


def settle(session: Session, ask: Ask, status: str, now: float) -> None:
    """Relayed to the CLI, expired (denied for want of an answer), or cancelled (the run
    ended first)."""
    ask.status = status
    if status == RELAYED:
        ask.relayed_at = now
    else:
        ask.answered_at = ask.answered_at or now
    session.add(ask)
    if status == EXPIRED:
        waited = format_time(ask.asked_at)
        message = f"{ask.task_key or ask.job_id}: no answer since {waited}, denied: {ask.summary}"
        _ask_event(session, ask, EventKind.ASK_EXPIRED, "warning", message, now)


def cancel_open(session: Session, execution_ids: Iterable[str], now: float) -> int:
    """The runs ended: whatever they still waited on is moot."""
    ids = sorted(set(execution_ids))
    if not ids:
        return 0
    query = select(Ask).where(col(Ask.execution_id).in_(ids), col(Ask.status).in_([OPEN, ANSWERED]))
    asks = list(session.exec(query))
    for ask in asks:
        settle(session, ask, CANCELLED, now)
    return len(asks)


def question_answers(ask: Ask) -> dict[str, str]:
    """A question's answer as the CLI takes it: question -> the operator's text (or the
    option label it names)."""
    tool_input = ask.tool_input or {}
    questions = tool_input.get("questions") if isinstance(tool_input, dict) else None
    text = ask.answer_text or ""
    if not isinstance(questions, list) or not questions:
        return {question_text(tool_input) or "question": text}
    answers = {}
    for question in questions:
        if not isinstance(question, dict):
            continue
        labels = [o.get("label") for o in question.get("options") or [] if isinstance(o, dict)]
        chosen = next((label for label in labels if label and label.lower() == text.lower()), text)
        answers[str(question.get("question", ""))] = chosen
    return answers
