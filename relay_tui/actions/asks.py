"""Keys that answer what an agent asked (the Needs-you pane): allow once, allow always for a
scope, deny with a message the agent reads, read the whole input, answer a question.

A mixin of the app (see :class:`~relay_tui.actions.protocol.ConsoleApp`): each reads the ask
under the cursor when the key arrives and sends one ``AnswerAsk`` command, which reaches the
agent through whichever engine runs it.
"""

from __future__ import annotations

import getpass
import socket

from relay_engine.ops.commands import AnswerAsk
from relay_engine.store.read_model.asks import AskView
from relay_tui.actions.protocol import ConsoleApp
from relay_tui.screens.ask import Answer, AskScreen, ScopeScreen
from relay_tui.screens.text import TextScreen


def operator_name() -> str:
    """Who answered, as ``relay answer`` and ``relay takeover`` record it."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def target_ask(app: ConsoleApp) -> AskView | None:
    target = app.current_target()
    ask = app.snapshot.ask(target.ask_id) if app.snapshot else None
    if ask is None:
        app.notify(
            "No ask under the cursor: move to a row of the Needs-you pane (6).",
            severity="warning",
        )
    return ask


class AskActions:
    """y, A, n and enter on a Needs-you row."""

    def action_answer_ask(self: ConsoleApp, how: str) -> None:
        ask = target_ask(self)
        if ask is None or self.refused_read_only():
            return
        if ask.kind == "question" and how != "deny":
            self.action_read_ask()  # a question is answered in words
            return
        answered(self, ask, how)

    def action_read_ask(self: ConsoleApp) -> None:
        ask = target_ask(self)
        if ask is None:
            return
        screen = AskScreen(ask, blink=self.blink, read_only=self.store.readonly)

        def chosen(result: Answer | None) -> None:
            if result:
                answered(self, ask, *result)

        self.push_screen(screen, chosen)


def answered(app: ConsoleApp, ask: AskView, how: str, text: str | None = None) -> None:
    """What a key or the ask dialog chose: send it, or ask for the scope or the reason."""
    if how == "allow":
        send_answer(app, ask, "allow")
    elif how == "answer":
        send_answer(app, ask, "answer", text=text)
    elif how == "always":

        def scoped(scope: str | None) -> None:
            if scope:
                send_answer(app, ask, "allow", always=scope)

        app.push_screen(ScopeScreen(ask), scoped)
    elif how == "deny":
        ask_deny(app, ask)


def send_answer(
    app: ConsoleApp,
    ask: AskView,
    answer: str,
    *,
    text: str | None = None,
    always: str | None = None,
) -> None:
    extra = {"text": text or None, "always": always}
    fields = {name: value for name, value in extra.items() if value}  # unset, as relay answer
    app.send_command(AnswerAsk(ask=ask.id, answer=answer, by=operator_name(), **fields))


def ask_deny(app: ConsoleApp, ask: AskView) -> None:
    """Deny, with what the agent reads instead (optional)."""
    screen = TextScreen(
        f"Deny: {ask.summary}",
        f"{ask.agent} on {ask.task_key or ask.job_id} is told no. Say why or what to do "
        "instead (optional; enter denies):",
        placeholder="e.g. use the test fixture instead",
        yes="Deny",
        optional=True,
        blink=app.blink,
    )

    def deny(text: str | None) -> None:
        if text is not None:
            send_answer(app, ask, "deny", text=text)

    app.push_screen(screen, deny)
