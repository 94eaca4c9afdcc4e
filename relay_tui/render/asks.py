"""Asks as the operator reads them: what the agent wants in one line, its whole input, and
the rule an "always" answer adds for each scope. Pure."""

from __future__ import annotations

import json

from relay_engine.store.read_model.asks import AskView


def wants(ask: AskView) -> str:
    """The tool and its exact input, on one line; a question as the agent put it."""
    if ask.kind == "question":
        return f"asks: {question_text(ask)}"
    return ask.summary


def question_text(ask: AskView) -> str:
    """The first question of an AskUserQuestion, else the summary."""
    questions = ask.tool_input.get("questions")
    if isinstance(questions, list) and questions and isinstance(questions[0], dict):
        return str(questions[0].get("question") or ask.summary)
    return str(ask.tool_input.get("question") or ask.summary)


def scope_rules(ask: AskView) -> list[tuple[str, str, str]]:
    """(scope, label, what it adds) for the allow-always picker: the rule ``relay answer
    --always`` would add, for this task, its job, or the agent everywhere."""
    rule = ask.suggested_rule or f"{ask.tool}(…)"
    task = ask.task_key or ask.job_id
    return [
        ("task", f"this task ({task})", f"allow {rule} for {task}"),
        ("job", f"this job ({ask.job_id})", f"allow {rule} for every task of job {ask.job_id}"),
        ("agent", f"this agent ({ask.agent})", f"allow {rule} for {ask.agent} in every job"),
    ]


def ask_detail(ask: AskView) -> str:
    """The whole input, as the agent sent it: a command, a file's new text, a diff."""
    tool_input = dict(ask.tool_input)
    if "command" in tool_input and isinstance(tool_input["command"], str):
        return tool_input["command"]
    if "new_string" in tool_input or "old_string" in tool_input:
        old = str(tool_input.get("old_string") or "")
        new = str(tool_input.get("new_string") or "")
        path = tool_input.get("file_path") or "?"
        lines = [f"--- {path}", f"+++ {path}"]
        lines += [f"-{line}" for line in old.splitlines()]
        lines += [f"+{line}" for line in new.splitlines()]
        return "\n".join(lines)
    if "content" in tool_input:
        return f"{tool_input.get('file_path') or '?'}:\n{tool_input['content']}"
    return json.dumps(tool_input, indent=2, ensure_ascii=False)
