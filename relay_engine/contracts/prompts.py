"""Prompt assembly: what an agent is told about its task.

The prompt carries everything the agent cannot see for itself: the job's objective,
what the tasks it depends on produced, the workstream's recent memory notes, and the
operator's overlay files from ``.relay/prompts/`` (chosen by repo, provider, role and
kind, most general first, so a specific overlay can refine a general one).

Pure: :mod:`relay_engine.ops.prompt_context` reads the files :func:`overlay_names` names
and the rows, and passes their text in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from relay_engine.contracts import troubleshooter
from relay_engine.contracts.planner import ASSESSOR_CONTRACT
from relay_engine.contracts.review import REVIEW_CONTRACT

MEMORY_NOTES_IN_PROMPT = 10
MEMORY_TOOLS_TEXT = (
    "## The job's memory\n"
    "relay keeps notes for this job's tasks. Use `memory_search` to find what earlier tasks "
    "noted before you start, and `memory_add` for what a later task must know that the "
    "repository does not say: a decision and its reason, a pitfall, where something lives."
)
DEPENDENCY_RESULT_CHARS = 2000


RESULT_CONTRACT = (
    "## When you finish\nWrite a JSON object with a `summary` field (and any `data`) to the "
    "file named by $RELAY_RESULT_FILE, or end your final message with it."
)
OWN_CONTRACTS = {
    "review": REVIEW_CONTRACT,
    "assess": ASSESSOR_CONTRACT,
    troubleshooter.KIND: troubleshooter.CONTRACT,
}


def answer_contract(kind: str) -> str:
    """The one section a task's prompt ends with: how to answer. A kind whose answer relay
    reads (a review's verdict, an assessor's decision, a troubleshooter's advice) has its
    own; every other task returns a summary. Never two: a model that follows the last
    instruction it read must not be rejected for it."""
    return OWN_CONTRACTS.get(kind, RESULT_CONTRACT)


@dataclass(frozen=True)
class DependencyResult:
    task_id: str
    title: str
    summary: str | None


@dataclass(frozen=True)
class PromptParts:
    task_key: str
    title: str
    input: str
    role: str
    kind: str
    objective: str
    dependency_results: Sequence[DependencyResult] = ()
    memory_notes: Sequence[str] = ()
    overlays: Sequence[str] = ()
    attempt: int = 1
    previous_error: str | None = None
    guidance: str | None = None  # a troubleshooter's advice after the task failed
    briefing: str = ""  # a troubleshooter's failure record
    contract: str = RESULT_CONTRACT  # how to answer: answer_contract(kind)
    operator_notes: Sequence[str] = ()  # what the operator said for this task (relay say)
    handed_back: bool = False  # the operator worked on it by hand and handed it back
    memory_tools: bool = False  # the agent's CLI has relay's memory_search and memory_add


def overlay_names(*, repo: str | None, provider: str, role: str, kind: str) -> list[str]:
    """The overlay files that apply, general to specific: all, repo, provider, role, kind."""
    names = ["all.md"]
    if repo:
        names.append(f"repo-{Path(repo).name}.md")
    return [*names, f"provider-{provider}.md", f"role-{role}.md", f"kind-{kind}.md"]


def assemble_prompt(parts: PromptParts) -> str:
    sections = [f"# Task {parts.task_key}: {parts.title}", f"Role: {parts.role}"]
    if parts.objective:
        sections.append(f"## Job objective\n{parts.objective}")
    sections.append(f"## Your task\n{parts.input or parts.title}")
    if parts.dependency_results:
        lines = [
            f"- **{dep.task_id}** ({dep.title}): {_clip(dep.summary or 'no summary')}"
            for dep in parts.dependency_results
        ]
        sections.append("## Results of the tasks this one depends on\n" + "\n".join(lines))
    notes = list(parts.memory_notes)[-MEMORY_NOTES_IN_PROMPT:]
    if notes:
        sections.append(
            "## Workstream memory (latest notes)\n" + "\n".join(f"- {n}" for n in notes)
        )
    if parts.memory_tools:
        sections.append(MEMORY_TOOLS_TEXT)
    if parts.attempt > 1 and parts.previous_error:
        sections.append(
            f"## Previous attempt\nAttempt {parts.attempt - 1} failed: {_clip(parts.previous_error)}"
        )
    if parts.guidance:
        sections.append(f"## A troubleshooter looked at the last failure\n{parts.guidance}")
    if parts.handed_back:
        sections.append(
            "## The operator took this task over\nThey worked on it in your branch by hand "
            "and handed it back: carry on from what the worktree holds now."
        )
    if parts.operator_notes:
        said = "\n".join(f"- {note}" for note in parts.operator_notes)
        sections.append(f"## The operator says\n{said}")
    if parts.briefing:
        sections.append(parts.briefing)
    sections.extend(overlay.strip() for overlay in parts.overlays if overlay.strip())
    sections.append(parts.contract)
    return "\n\n".join(sections) + "\n"


def _clip(text: str, limit: int = DEPENDENCY_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
