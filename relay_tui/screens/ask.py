"""An ask in full, and the scope picker of an "allow always" answer.

The pane shows one line per ask; here is the whole input the agent sent (a long command, a
file's new text, an edit as a diff), its last message, and the answer keys; a question has
a box for the answer. The scope picker says, for each scope, exactly which rule it adds.
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Static
from textual.widgets.option_list import Option

from relay_engine.store.read_model.asks import AskView
from relay_tui.render.asks import ask_detail, question_text, scope_rules
from relay_tui.render.styles import clock_time
from relay_tui.screens.base import Dialog, closable_while_mounting
from relay_tui.widgets.options import SafeOptionList

Answer = tuple[str, ...]
"""("allow",), ("always",), ("deny",) or ("answer", text)."""


class AskScreen(Dialog[Answer]):
    """One ask: what the agent wants, whole, and the answers."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="ask-close"),
        Binding("y", "choose('allow')", "Allow once", id="ask-screen-allow"),
        Binding("A", "choose('always')", "Allow always…", id="ask-screen-always"),
        Binding("n", "choose('deny')", "Deny…", id="ask-screen-deny"),
    ]

    def __init__(self, ask: AskView, *, blink: bool = True, read_only: bool = False) -> None:
        super().__init__(ask.task_key or ask.job_id)
        self.ask = ask
        self.blink = blink
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        ask = self.ask
        with Vertical(classes="dialog ask") as box:
            box.border_title = Text(f"ask {ask.id} · {ask.agent} on {ask.task_key or ask.job_id}")
            box.border_subtitle = Text(asked_words(ask))
            if ask.kind == "question":
                yield Static(Text(question_text(ask), style="bold"), classes="question")
            else:
                yield Static(Text(f"{ask.tool} wants to run:", style="bold"))
                with VerticalScroll(id="ask-input"):
                    yield Static(input_view(ask))
            if ask.context:
                yield Static(Text.assemble(("it said: ", "dim"), ask.context), classes="context")
            if ask.suggested_rule and ask.kind != "question":
                yield Static(Text(f"allow always adds: {ask.suggested_rule}", style="dim"))
            if self.read_only:
                yield Static(Text("read-only here: answer from a console that can write"))
            elif ask.kind == "question":
                yield Input(placeholder="your answer (enter sends)", id="reply")
                with Horizontal(classes="buttons"):
                    yield Button("Answer", id="answer", variant="warning")
                    yield Button("Deny (n)", id="deny")
            else:
                with Horizontal(classes="buttons"):
                    yield Button("Allow once (y)", id="allow", variant="success")
                    yield Button("Always… (A)", id="always")
                    yield Button("Deny… (n)", id="deny", variant="error")

    @closable_while_mounting
    def on_mount(self) -> None:
        for box in self.query("#reply").results(Input):
            box.cursor_blink = self.blink
            box.focus()

    def action_close(self) -> None:
        self.answer(None)

    def action_choose(self, how: str) -> None:
        if self.read_only or (self.ask.kind == "question" and how != "deny"):
            return
        self.answer((how,))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "answer":
            self._reply()
        elif event.button.id in ("allow", "always", "deny"):
            self.answer((event.button.id,))

    @on(Input.Submitted, "#reply")
    def _reply(self) -> None:
        text = self.query_one("#reply", Input).value.strip()
        if text:
            self.answer(("answer", text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Letters typed into the answer box are the answer, not keys."""
        if action == "choose" and self.query("#reply"):
            return parameters == ("deny",) and not self.query_one("#reply", Input).has_focus
        return True


def asked_words(ask: AskView) -> str:
    timeout = f" · denied at {clock_time(ask.timeout_at)[:5]} unanswered" if ask.timeout_at else ""
    return f"asked {clock_time(ask.asked_at)[:5]}{timeout}"


def input_view(ask: AskView) -> Text | Syntax:
    detail = ask_detail(ask)
    if detail.startswith("--- "):
        return Syntax(detail, "diff", theme="ansi_dark", background_color="default", word_wrap=True)
    return Text(detail)


class ScopeScreen(Dialog[str]):
    """Allow always: for this task, this job, or this agent; each says the rule it adds."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="scope-cancel")]

    def __init__(self, ask: AskView) -> None:
        super().__init__(ask.task_key or ask.job_id)
        self.ask = ask

    def compose(self) -> ComposeResult:
        ask = self.ask
        with Vertical(classes="dialog") as box:
            box.border_title = Text(f"Allow always: {ask.summary}")
            yield Label(Text("Allow now, and from now on without asking (enter picks):"))
            options = [
                Option(Text.assemble((label, "bold"), "\n  ", (adds, "dim")), id=scope)
                for scope, label, adds in scope_rules(ask)
            ]
            yield SafeOptionList(*options, id="scopes")

    def action_cancel(self) -> None:
        self.answer(None)

    @on(SafeOptionList.OptionSelected)
    def _picked(self, event: SafeOptionList.OptionSelected) -> None:
        self.answer(event.option.id)
