"""The final review contract, and the follow-up tasks a review or a conflict asks for.

A reviewer agent gets the job's objective, what its tasks reported, and the diff of the
job branch against its base (truncated with a note past a size limit). It answers with
``{verdict: "approve" | "changes", summary, findings: [{file, line, severity, text}]}``,
checked like planner output: an unusable answer fails the attempt with the reason, and the
retry's prompt carries it. ``changes`` becomes fix work; a conflict with a moved base
becomes a ``rebase`` task.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from relay_engine.contracts.planner import (
    OUTPUT_RULE,
    PlanRejected,
    TaskSummary,
    task_section,
    validate_answer,
)
from relay_engine.contracts.task_definitions import TaskDef

DEFAULT_REVIEWER_SCRIPT: dict[str, Any] = {"duration": 0.5, "lines": 2, "review": {}}
DEFAULT_FIXER_SCRIPT: dict[str, Any] = {"duration": 0.5, "lines": 2}
DEFAULT_REBASER_SCRIPT: dict[str, Any] = {"duration": 0.5, "lines": 2, "resolve_conflicts": "ours"}


class Finding(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    file: str = ""
    line: int | None = Field(default=None, ge=0)
    severity: str = Field(default="minor", max_length=40)
    text: str = Field(min_length=1)


class ReviewResult(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict: Literal["approve", "changes"]
    summary: str = ""
    findings: list[Finding] = []

    @model_validator(mode="after")
    def _changes_say_what(self) -> ReviewResult:
        if self.verdict == "changes" and not self.findings:
            raise ValueError("verdict 'changes' needs at least one finding saying what to change")
        return self


def validate_review_output(raw: object) -> ReviewResult | PlanRejected:
    """The reviewer's answer, or every problem with it in one paragraph for the retry."""
    return validate_answer(raw, ReviewResult)


@dataclass(frozen=True)
class ReviewInput:
    """What a review prompt shows; the task prompt around it adds the job's objective."""

    title: str
    base_branch: str
    head_branch: str
    head_sha: str
    diffstat: str
    diff: str
    round: int
    tasks: Sequence[TaskSummary] = ()


def truncated(diff: str, limit: int) -> str:
    """The diff up to ``limit`` characters (whole lines), with a note saying what was cut."""
    if len(diff) <= limit:
        return diff
    cut = diff.rfind("\n", 0, limit) + 1 or limit
    return (
        diff[:cut] + f"\n[diff truncated: showing {cut:,} of {len(diff):,} characters; read the "
        "rest in the repository]\n"
    )


def _review_contract() -> str:
    example = {
        "verdict": "changes",
        "summary": "The parser is sound; the CLI swallows its errors.",
        "findings": [
            {
                "file": "cli.py",
                "line": 42,
                "severity": "major",
                "text": "parse errors are caught and ignored; report them and exit 2",
            }
        ],
    }
    return (
        "## What to return\n\nReturn exactly one JSON object of this shape:\n\n"
        f"```json\n{json.dumps(example, indent=2)}\n```\n\n"
        '- `verdict`: `"approve"` if the branch may be merged as it is, `"changes"` if it '
        "must not be merged before the findings are fixed.\n"
        "- `summary`: a few sentences on the change as a whole.\n"
        "- `findings`: each `{file, line, severity, text}`; `severity` is `critical`, "
        "`major`, `minor` or `info`. `changes` needs at least one finding.\n\n"
        "Review only; do not edit files: your edits are not kept.\n\n"
        f"{OUTPUT_RULE}"
    )


REVIEW_CONTRACT = _review_contract()


def review_prompt(parts: ReviewInput, diff_limit: int) -> str:
    """The review's task input; its answer contract is added when the prompt is assembled
    (:func:`relay_engine.contracts.prompts.answer_contract`), last, so nothing follows it."""
    sections = [
        f"# Relay final review, round {parts.round}",
        f"Job: {parts.title}. Decide whether `{parts.head_branch}` (at `{parts.head_sha[:12]}`) "
        f"may be merged into `{parts.base_branch}`. The repository is checked out at that "
        "commit in your working directory.",
        f"## Tasks\n\n{task_section(parts.tasks)}",
        f"## Diffstat\n\n```\n{parts.diffstat.strip(chr(10)) or '(no changes)'}\n```",
        f"## Diff\n\n```diff\n{truncated(parts.diff, diff_limit).rstrip(chr(10))}\n```",
    ]
    return "\n\n".join(sections) + "\n"


def review_task_id(number: int) -> str:
    return f"review-{number}"


def review_task(number: int, prompt: str, sim: dict[str, Any] | None) -> TaskDef:
    script = {**(sim or DEFAULT_REVIEWER_SCRIPT), "review_round": number}
    return TaskDef(
        id=review_task_id(number),
        title=f"Final review, round {number}",
        input=prompt,
        role="reviewer",
        kind="review",
        size="M",
        sim=script,
    )


def finding_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for finding in findings:
        where = str(finding.get("file") or "")
        if where and finding.get("line"):
            where += f":{finding['line']}"
        prefix = f"{where} " if where else ""
        lines.append(f"- {prefix}[{finding.get('severity') or 'minor'}] {finding.get('text')}")
    return lines


def fix_guidance(summary: str | None, findings: Sequence[dict[str, Any]]) -> str:
    """The findings as one text: a fix task's input, or a planner round's guidance."""
    head = "The final review asked for changes"
    head += f": {summary.strip()}" if summary and summary.strip() else "."
    return "\n".join([head, *finding_lines(findings)])


def fix_task(number: int, guidance: str, sim: dict[str, Any] | None) -> TaskDef:
    return TaskDef(
        id=f"fix-{number}",
        title=f"Fix the findings of review {number}",
        input=f"{guidance}\n\nFix every finding in this repository; the branch is reviewed again after.",
        role="implementer",
        kind="fix",
        size="M",
        sim=sim or DEFAULT_FIXER_SCRIPT,
    )


DEFAULT_PREPARER_SCRIPT: dict[str, Any] = {"duration": 0.3, "lines": 1, "resolve_conflicts": "ours"}


def merge_prep_task(
    number: int,
    base_branch: str,
    head_branch: str,
    conflicts: Sequence[str],
    checks: Sequence[str],
    sim: dict[str, Any] | None,
) -> TaskDef:
    """Prepare the job branch to merge: the base merged in, the repository's checks green.
    Never resumed (:data:`relay_engine.ops.assignments.NEVER_RESUMED_KINDS`): it must see the
    branch as it is now."""
    listed = "\n".join(f"- `{check}`" for check in checks)
    merging = (
        f"`{base_branch}` conflicts with `{head_branch}` in: {', '.join(conflicts)}; the "
        "conflicts are left in place (`git status` lists them): resolve every one so that both "
        "sides' intent survives, and remove all conflict markers."
        if conflicts
        else f"`{base_branch}` is being merged in (it may have moved since the work was done)."
    )
    text = (
        f"Prepare `{head_branch}` to merge into `{base_branch}`. Your working directory is "
        f"`{head_branch}` at its head. {merging}\n\n"
        f"The repository's checks must pass before relay merges:\n{listed}\n\n"
        "Run them, and fix what fails without changing what the branch is for. When you "
        "finish, relay runs the checks itself; a failing one fails this task with its output. "
        "relay commits your changes and the merge."
    )
    return TaskDef(
        id=f"merge-prep-{number}",
        title=f"Prepare the merge into {base_branch}",
        input=text,
        role="implementer",
        kind="merge_prep",
        size="M",
        sim=sim or DEFAULT_PREPARER_SCRIPT,
    )


def rebase_task(
    number: int,
    base_branch: str,
    head_branch: str,
    conflicts: Sequence[str],
    sim: dict[str, Any] | None,
) -> TaskDef:
    paths = ", ".join(conflicts) or "(paths not known)"
    text = (
        f"`{base_branch}` moved and now conflicts with `{head_branch}` in: {paths}.\n\n"
        f"Your working directory is `{head_branch}` with the new `{base_branch}` being merged "
        "in; the conflicts are left in place (`git status` lists them). Resolve every conflict "
        "so that both sides' intent survives, and remove all conflict markers. relay commits "
        "the merge when you finish; the branch is reviewed again after."
    )
    return TaskDef(
        id=f"rebase-{number}",
        title=f"Resolve conflicts with {base_branch}",
        input=text,
        role="implementer",
        kind="rebase",
        size="M",
        sim=sim or DEFAULT_REBASER_SCRIPT,
    )
