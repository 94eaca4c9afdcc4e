"""The asking step: what running agents ask before they act, decided and answered.

A conversing CLI (claude through its permission channel) sends a request for every tool use
its own mode does not allow, and waits. Each tick this step decides the new requests by the
rules (relay.toml's ``[permissions]``, the agent's, and those "always" answers added), answers
what the rules decide at once, opens an ask for the rest (or refuses them, when the policy
says nobody answers), hands the operator's answers to the CLI, denies asks left unanswered
past their timeout, passes the operator's words (``relay say``) to a running session, and
ends a conversation once its turn is over. While an agent waits on an ask, its timeout clock
stands still.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from relay_engine.agents.adapters.base import Conversing, Denial, ToolAnswer, ToolRequest
from relay_engine.contracts.rules import Rule
from relay_engine.core.permissions import (
    Policy,
    Request,
    Verdict,
    agent_policy,
    decide,
    describe,
    workspace_policy,
)
from relay_engine.loop.live import LiveExecution
from relay_engine.loop.runtime import EngineRuntime
from relay_engine.ops import asks
from relay_engine.store.events import EventKind, record_event
from relay_engine.store.schema import Ask, Task


@dataclass(frozen=True)
class _New:
    live: LiveExecution
    request: ToolRequest


class Asking:
    """One engine's asking step (see the module docstring)."""

    def __init__(self, runtime: EngineRuntime) -> None:
        self.runtime = runtime
        self._new: list[_New] = []

    def collect(self, live: LiveExecution) -> None:
        """Take the requests a pump just parsed (decided in :meth:`step`), and send at once
        what the CLI's protocol itself needs said (a handshake's next step)."""
        for line in live.parser.take_outgoing():
            live.process.send(line)
        self._new += [_New(live, request) for request in live.parser.take_requests()]

    def step(self, now: float) -> bool:
        """Decide, open, relay, expire and end conversations; True when anything moved."""
        talking = [live for live in self.runtime.live.values() if live.process.conversing]
        changed = False
        if self._new:
            new, self._new = self._new, []
            changed |= self._decide(new, now)
        if any(live.asks for live in talking):
            changed |= self._relay_answers(talking, now)
        if talking:
            changed |= self._pass_words(talking, now)
        for live in talking:
            if not live.asks and live.turn_over():
                live.process.close_stdin()
        return changed

    # -- new requests ------------------------------------------------------------------
    def _decide(self, new: list[_New], now: float) -> bool:
        with self.runtime.store.write() as session:
            for item in new:
                self._one(session, item.live, item.request, now)
        return True

    def _one(self, session: Session, live: LiveExecution, tool: ToolRequest, now: float) -> None:
        policy, narrower = self._policies(live.agent_id)
        request = Request(tool.tool, tool.input, str(live.process.spec.cwd))
        extra_allow, extra_deny = self._added_rules(session, live)
        verdict = decide(
            request, policy, narrower=narrower, extra_allow=extra_allow, extra_deny=extra_deny,
            read_only=live.access == "read-only",
        )  # fmt: skip
        if tool.kind == "question":
            verdict = Verdict("ask", None, "a question for the operator")
        if verdict.effect == "allow":
            self._answer(live, tool, ToolAnswer(True))
        elif verdict.effect == "deny" or (narrower or policy).ask == "deny":
            why = verdict.reason if verdict.effect == "deny" else "nobody answers asks here"
            self._deny(
                session, live, tool, request, Denial(tool.tool, describe(request), "rule", why), now
            )
        else:
            ask = asks.open_ask(
                session, _asker(live, self.runtime.engine_id), request, kind=tool.kind,
                request_id=tool.request_id, context=tool.context,
                timeout_s=(narrower or policy).ask_timeout_s, now=now,
            )  # fmt: skip
            live.wait_on(ask.id or 0, tool, now)

    def _policies(self, agent_id: str) -> tuple[Policy, Policy | None]:
        config = self.runtime.config
        policy = workspace_policy(config.permissions)
        agent = config.agent(agent_id)
        return policy, agent_policy(agent, policy) if agent is not None else None

    def _added_rules(
        self, session: Session, live: LiveExecution
    ) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
        return asks.added_rules(
            session, task_key=live.task_key, job_id=live.job_id, agent=live.agent_id
        )

    # -- answers ---------------------------------------------------------------------------
    def _relay_answers(self, talking: list[LiveExecution], now: float) -> bool:
        waiting = {ask_id: live for live in talking for ask_id in live.asks}
        changed = False
        with self.runtime.store.write() as session:
            rows = session.exec(select(Ask).where(col(Ask.id).in_(sorted(waiting))))
            for ask in rows:
                live = waiting[ask.id or 0]
                if ask.status == asks.ANSWERED:
                    changed |= self._relay(session, live, ask, now)
                elif (
                    ask.status == asks.OPEN and ask.timeout_at is not None and now >= ask.timeout_at
                ):
                    changed |= self._expire(session, live, ask, now)
                elif ask.status in (asks.CANCELLED, asks.EXPIRED, asks.RELAYED):
                    live.stop_waiting(ask.id or 0, now)
        return changed

    def _relay(self, session: Session, live: LiveExecution, ask: Ask, now: float) -> bool:
        tool = live.stop_waiting(ask.id or 0, now)
        if tool is None:
            return False
        if ask.answer == "deny":
            message = ask.answer_text or "The operator refused."
            request = Request(tool.tool, tool.input, str(live.process.spec.cwd))
            denial = Denial(tool.tool, ask.summary, "operator", message, tool.tool_use_id)
            self._deny(session, live, tool, request, denial, now, message=message)
        elif ask.answer == "answer":
            self._answer(live, tool, ToolAnswer(True, answers=asks.question_answers(ask)))
        else:
            self._answer(live, tool, ToolAnswer(True))
        asks.settle(session, ask, asks.RELAYED, now)
        return True

    def _expire(self, session: Session, live: LiveExecution, ask: Ask, now: float) -> bool:
        tool = live.stop_waiting(ask.id or 0, now)
        asks.settle(session, ask, asks.EXPIRED, now)
        if tool is None:
            return True
        waited = (ask.timeout_at or now) - ask.asked_at
        span = f"{waited / 60:.0f} min" if waited >= 90 else f"{waited:.0f} s"
        message = f"no answer in {span}: denied, go on without it"
        request = Request(tool.tool, tool.input, str(live.process.spec.cwd))
        denial = Denial(tool.tool, ask.summary, "timeout", message, tool.tool_use_id)
        self._deny(session, live, tool, request, denial, now, message=message)
        return True

    # -- the operator's words ------------------------------------------------------------
    def _pass_words(self, talking: list[LiveExecution], now: float) -> bool:
        """``relay say`` words for a task whose session is running go to that session."""
        by_key = {live.task_key: live for live in talking if live.task_key}
        if not by_key:
            return False
        with self.runtime.store.read() as session:
            query = select(Task.key, Task.operator_notes).where(col(Task.key).in_(sorted(by_key)))
            said = {key: notes for key, notes in session.exec(query) if notes}
        if not said:
            return False
        with self.runtime.store.write() as session:
            for key, notes in said.items():
                self._say(session, by_key[key], key, list(notes), now)
        return True

    def _say(
        self, session: Session, live: LiveExecution, key: str, notes: list[str], now: float
    ) -> None:
        task = session.get(Task, key)
        adapter = live.adapter
        if task is None or not isinstance(adapter, Conversing):
            return
        for note in notes:
            if live.process.send(adapter.user_line(note)):
                live.turns_expected += 1
        task.operator_notes = [n for n in (task.operator_notes or []) if n not in notes]
        session.add(task)

    # -- writing to the CLI --------------------------------------------------------------
    def _answer(self, live: LiveExecution, tool: ToolRequest, answer: ToolAnswer) -> None:
        adapter = live.adapter
        if isinstance(adapter, Conversing):
            live.process.send(adapter.answer_line(tool, answer))

    def _deny(
        self,
        session: Session,
        live: LiveExecution,
        tool: ToolRequest,
        request: Request,
        denial: Denial,
        now: float,
        *,
        message: str | None = None,
    ) -> None:
        text = message or f"relay denied it: {denial.reason}"
        self._answer(live, tool, ToolAnswer(False, text))
        live.denials.append(
            Denial(denial.tool, denial.summary, denial.by, denial.reason, tool.tool_use_id)
        )
        said = f"{describe(request)} denied ({denial.by}): {denial.reason}"
        record_denial(session, live, denial, said, now)


def record_denial(
    session: Session, live: LiveExecution, denial: Denial, said: str, now: float
) -> None:
    """A refused tool reads the same in the change feed whoever refused it (relay's rules,
    the operator, a timeout, or the CLI on its own): the run's task, a warning, and who
    refused in the data."""
    message = f"{live.task_key or live.job_id}: {said}"[:500]
    record_event(
        session, EventKind.AGENT_DENIED, message, now=now, job_id=live.job_id,
        task_key=live.task_key, level="warning", data={"tool": denial.tool, "by": denial.by},
    )  # fmt: skip


def _asker(live: LiveExecution, engine_id: str) -> asks.Asker:
    return asks.Asker(
        job_id=live.job_id,
        task_key=live.task_key,
        execution_id=live.execution_id,
        engine_id=engine_id,
        agent=live.agent_id,
        provider=live.provider,
    )
