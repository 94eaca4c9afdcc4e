"""The planner and assessor contract: prompts out, JSON back, checked before anything runs.

A planner agent answers with a JSON object (written to ``$RELAY_RESULT_FILE`` or ending its
final message). Models add chatter, wrap JSON in fences and make mistakes, so the answer is
dug out of the text, checked completely, and every problem is returned in one paragraph
that goes back into the planner's retry prompt.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from relay_engine.contracts.inputs import DEFAULT_MAX_TASK_INPUT_BYTES
from relay_engine.contracts.task_definitions import (
    Problem,
    TaskDef,
    definition_hash,
    item_label,
    validate_graph,
    validation_problems,
)

Answer = TypeVar("Answer", bound=BaseModel)
SUMMARY_CAP = 500
TASK_LIST_CAP = 200


class PlannedBlocker(BaseModel):
    """A child of this round that waits on another job: ``on = "JOB/TASK"`` until that task
    succeeds, ``on = "JOB"`` until that job is done (merged, or succeeded with nothing to
    merge). The planner sees what other jobs are doing; the job file's author did not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    on: str


class PlannerResult(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    objective_status: Literal["in_progress", "satisfied"]
    assessment: str = ""
    next_tasks: list[TaskDef] = []
    unblocks: list[str] = []
    blockers: list[PlannedBlocker] = []


class AssessorResult(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    decision: Literal["continue", "replan"]
    summary: str = ""
    findings: list[str] = []


@dataclass(frozen=True)
class FleetAgent:
    """An agent that could take work, as the planner is told about it."""

    id: str
    provider: str
    roles: tuple[str, ...]
    model_class: str | None = None
    availability: str = "ready"  # "ready", "limited until 14:05", "not logged in", …


@dataclass(frozen=True)
class PlanAccepted:
    result: PlannerResult


@dataclass(frozen=True)
class PlanRejected:
    reason: str  # one paragraph, fed back into the retry prompt
    problems: tuple[Problem, ...] = ()


# --- finding the JSON -----------------------------------------------------------------------

_FENCED_JSON = re.compile(r"```[ \t]*json[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def _span_end(text: str, start: int) -> int | None:
    """End of the balanced {...} opening at ``start``; braces inside strings do not count."""
    depth = 0
    in_string = escaped = False
    for pos in range(start, len(text)):
        char = text[pos]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return pos + 1
    return None


def _top_level_spans(text: str) -> list[str]:
    spans = []
    pos = text.find("{")
    while pos != -1:
        end = _span_end(text, pos)
        if end is None:  # a stray brace in prose: look past it
            pos = text.find("{", pos + 1)
            continue
        spans.append(text[pos:end])
        pos = text.find("{", end)
    return spans


def _last_object(candidates: list[str]) -> dict[str, Any] | None:
    for candidate in reversed(candidates):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object: from ```json fences if any parse, else anywhere."""
    found = _last_object(_FENCED_JSON.findall(text))
    return found if found is not None else _last_object(_top_level_spans(text))


def _why_no_object(text: str) -> str:
    fenced = _FENCED_JSON.findall(text)
    candidates = fenced or _top_level_spans(text)
    if candidates:
        try:
            json.loads(candidates[-1])
        except ValueError as error:
            where = "the ```json block" if fenced else "the last {...} in the output"
            return f"{where} is not valid JSON ({error})"
        return "the output holds JSON, but not an object"
    if not text.strip():
        return "the output is empty; expected a JSON object"
    return "no JSON object found in the output"


def _as_object(raw: object) -> tuple[dict[str, Any] | None, str]:
    if isinstance(raw, dict):
        return raw, ""
    if isinstance(raw, str):
        found = extract_json_object(raw)
        return found, "" if found is not None else _why_no_object(raw)
    return None, f"expected a JSON object, got {type(raw).__name__}"


_JOB_OR_TASK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def blocker_shape_problems(
    blockers: Sequence[PlannedBlocker], children: Collection[str]
) -> list[Problem]:
    """A blocker holds one of this round's tasks, on ``JOB/TASK`` or ``JOB``; whether that
    exists, and whether the wait closes a circle, the shell checks against the database."""
    problems = []
    for index, blocker in enumerate(blockers):
        field = f"blockers[{index}]"
        if blocker.task not in children:
            problems.append(Problem(f"{field}.task", f"{blocker.task!r} is not in next_tasks"))
        if not _JOB_OR_TASK.fullmatch(blocker.on):
            problems.append(Problem(f"{field}.on", f"{blocker.on!r} is not JOB or JOB/TASK"))
    return problems


def with_blockers(
    plan: PlanRejected | PlanAccepted, problems: Sequence[Problem]
) -> PlanRejected | PlanAccepted:
    """An accepted plan turned down for what its blockers name (see ``ops.upstream``)."""
    return _rejected(problems) if problems and isinstance(plan, PlanAccepted) else plan


def _rejected(problems: Sequence[Problem]) -> PlanRejected:
    count = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
    reason = f"{count}: " + "; ".join(str(p) for p in problems) + "."
    return PlanRejected(reason=reason, problems=tuple(problems))


# --- planner output -------------------------------------------------------------------------


def _parse_next_tasks(raws: Any) -> tuple[list[TaskDef], list[int], list[Problem], set[str]]:
    if not isinstance(raws, list):
        return [], [], [Problem("next_tasks", "must be a list of task objects")], set()
    tasks: list[TaskDef] = []
    positions: list[int] = []
    problems: list[Problem] = []
    failed_ids: set[str] = set()
    for index, raw in enumerate(raws):
        label = item_label("next_tasks", index, raw)
        try:
            tasks.append(TaskDef.model_validate(raw))
            positions.append(index)
        except ValidationError as error:
            problems += validation_problems(error, label, TaskDef)
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                failed_ids.add(raw["id"])
    return tasks, positions, problems, failed_ids


def _status_problems(result: PlannerResult, task_count: int) -> list[Problem]:
    if result.objective_status == "in_progress" and task_count == 0 and not result.unblocks:
        return [Problem("next_tasks", "in_progress but no next_tasks and nothing in unblocks")]
    if result.objective_status == "satisfied" and task_count > 0:
        message = "objective is 'satisfied' but next_tasks is not empty; choose one"
        return [Problem("objective_status", message)]
    return []


def validate_planner_output(
    raw: object,
    *,
    existing_task_ids: Collection[str],
    known_roles: Collection[str] | None,
    known_agents: Collection[str] | None = None,
    max_input_bytes: int = DEFAULT_MAX_TASK_INPUT_BYTES,
) -> PlanAccepted | PlanRejected:
    """Accept a plan only if every task could be stored and scheduled as written: its roles
    are ones some agent takes, and an agent it names is one the fleet has (None: unchecked).

    Reusing an existing task id is not judged here: :func:`materialise` compares definitions.
    """
    data, why = _as_object(raw)
    if data is None:
        return _rejected([Problem("", why)])
    raw_tasks = data.get("next_tasks", [])
    problems: list[Problem] = []
    try:
        header = PlannerResult.model_validate({**data, "next_tasks": []})
    except ValidationError as error:
        header = None
        problems += validation_problems(error, "", PlannerResult)
    tasks, positions, task_problems, failed_ids = _parse_next_tasks(raw_tasks)
    problems += task_problems
    existing = set(existing_task_ids)
    graph_problems = validate_graph(
        tasks,
        existing_ids=existing | failed_ids,
        known_roles=known_roles,
        known_agents=known_agents,
        field_prefix="next_tasks",
        positions=positions,
        max_input_bytes=max_input_bytes,
    )
    # Name the field as the contract does: planners write "dependencies".
    problems += [
        Problem(p.field.replace(".depends_on", ".dependencies"), p.message) for p in graph_problems
    ]
    if header is not None:
        count = len(raw_tasks) if isinstance(raw_tasks, list) else 0
        problems += _status_problems(header, count)
        known = existing | {t.id for t in tasks} | failed_ids
        problems += [
            Problem(f"unblocks[{i}]", f"unknown task {task_id!r}")
            for i, task_id in enumerate(header.unblocks)
            if task_id not in known
        ]
        problems += blocker_shape_problems(header.blockers, {t.id for t in tasks} | failed_ids)
    if problems or header is None:
        return _rejected(problems)
    return PlanAccepted(header.model_copy(update={"next_tasks": tasks}))


def validate_answer(raw: object, model: type[Answer]) -> Answer | PlanRejected:
    """An agent's JSON answer as ``model``, or every problem with it in one paragraph."""
    data, why = _as_object(raw)
    if data is None:
        return _rejected([Problem("", why)])
    try:
        return model.model_validate(data)
    except ValidationError as error:
        return _rejected(validation_problems(error, "", model))


def validate_assessor_output(raw: object) -> AssessorResult | PlanRejected:
    return validate_answer(raw, AssessorResult)


# --- materialisation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Materialisation:
    create: tuple[TaskDef, ...]
    unchanged: tuple[str, ...]
    conflicts: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.conflicts

    @property
    def reason(self) -> str:
        """Why the plan fails, or "" when it does not."""
        return "; ".join(
            f"task {task_id} already exists with a different definition"
            for task_id in self.conflicts
        )


def materialise(
    plan_tasks: Sequence[TaskDef], existing: Mapping[str, str], job_priority: str
) -> Materialisation:
    """Sort a plan into new tasks, identical restatements, and clashes with stored tasks.

    ``existing`` maps task id to the stored :func:`definition_hash`; a re-run of the same
    plan is therefore a no-op rather than a conflict.
    """
    seen = dict(existing)
    create: list[TaskDef] = []
    unchanged: list[str] = []
    conflicts: list[str] = []
    for task in plan_tasks:
        digest = definition_hash(task, job_priority)
        if task.id not in seen:
            seen[task.id] = digest
            create.append(task)
        elif seen[task.id] == digest:
            if task.id in existing and task.id not in unchanged:
                unchanged.append(task.id)
        elif task.id not in conflicts:
            conflicts.append(task.id)
    return Materialisation(tuple(create), tuple(unchanged), tuple(conflicts))


# --- prompts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSummary:
    id: str
    title: str
    state: str
    result_summary: str | None = None
    error: str | None = None
    role: str = "implementer"
    dependencies: tuple[str, ...] = ()


def _cap(text: str, limit: int = SUMMARY_CAP) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _indented(label: str, text: str) -> str:
    body = _cap(text).replace("\n", "\n    ")
    return f"  {label}: {body}"


def _task_line(task: TaskSummary) -> str:
    deps = f"; depends on {', '.join(task.dependencies)}" if task.dependencies else ""
    title = _cap(" ".join(task.title.split()), 200)
    lines = [f"- `{task.id}` [{task.state}] ({task.role}) {title}{deps}"]
    if task.result_summary:
        lines.append(_indented("Result", task.result_summary))
    if task.error:
        lines.append(_indented("Error", task.error))
    return "\n".join(lines)


def task_section(tasks: Sequence[TaskSummary]) -> str:
    if not tasks:
        return "No tasks yet."
    counts = Counter(str(task.state) for task in tasks)
    tally = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    header = f"{len(tasks)} tasks: {tally}."
    shown = list(tasks)
    if len(shown) > TASK_LIST_CAP:
        shown = shown[::-1][:TASK_LIST_CAP]
        omitted = len(tasks) - TASK_LIST_CAP
        header += (
            f" Showing the {TASK_LIST_CAP} most recent, newest first;"
            f" {omitted} older tasks are not listed."
        )
    return header + "\n\n" + "\n".join(_task_line(task) for task in shown)


def _example_plan(role: str) -> str:
    example = {
        "objective_status": "in_progress",
        "assessment": "The parser exists; the CLI still needs wiring and tests.",
        "next_tasks": [
            {
                "id": "cli-wiring",
                "title": "Wire the parser into the CLI",
                "input": "Call parse_config from main() and report errors on stderr.",
                "role": role,
                "story_size": "M",
                "dependencies": [],
            },
            {
                "id": "cli-tests",
                "title": "Test the CLI end to end",
                "input": "Run the CLI on good and bad configs; assert on exit codes and output.",
                "role": role,
                "story_size": "S",
                "dependencies": ["cli-wiring"],
            },
        ],
        "unblocks": [],
    }
    return json.dumps(example, indent=2)


OUTPUT_RULE = (
    "Write the JSON object, and nothing else, to the file named by the environment variable "
    "`$RELAY_RESULT_FILE`. If you cannot write that file, end your final message with the "
    "JSON object in a ```json fenced block; nothing may follow it."
)


def _planner_contract(roles: Collection[str]) -> str:
    allowed = sorted(roles) or ["implementer"]
    role_list = ", ".join(f"`{r}`" for r in allowed)
    example_role = "implementer" if "implementer" in allowed else allowed[0]
    rules = [
        '- `objective_status`: `"satisfied"` when the objective is fully met (then '
        '`next_tasks` must be empty), otherwise `"in_progress"` with at least one task.',
        "- `assessment`: a few sentences on where the job stands and why these tasks come next.",
        "- `next_tasks[].id`: 1-64 letters, digits, `.`, `_` or `-`, starting with a letter or "
        "digit, unique within `next_tasks`. Reuse an existing id only to restate that task "
        "unchanged; new work needs a new id.",
        "- `next_tasks[].dependencies`: ids from `next_tasks` or from the tasks listed above; "
        "no cycles.",
        f"- `next_tasks[].role`: one of {role_list}.",
        "- Optional `next_tasks[].agent`: the id of an agent listed under Agents, to pin the "
        "task to it; leave it out to let relay pick any agent of the role that is free.",
        "- `next_tasks[].story_size`: `S`, `M`, `L` or `XL` (about 15, 30, 60 or 120 minutes).",
        "- Optional per task: `priority` (`P0` most urgent .. `P3`), `workstream`, "
        "`model_class`, `kind` (`work`, `review`, `assess`, `merge_prep`, `troubleshoot`), "
        "`max_attempts` "
        "(1-20), `timeout` (seconds). Do not add other task fields.",
        "- `unblocks`: ids of existing FAILED or CANCELLED tasks to run again as they are "
        "(for instance tasks this round superseded); `in_progress` with only `unblocks` and "
        "no `next_tasks` is fine. Usually empty.",
        '- Optional `blockers`: `[{"task": ID, "on": "JOB/TASK" or "JOB"}]` when a task of '
        "`next_tasks` must wait on another job: on its task `TASK` succeeding, or on job "
        "`JOB` being merged. Usually empty.",
    ]
    return "\n".join(
        [
            "## What to return",
            "",
            "Return exactly one JSON object of this shape:",
            "",
            "```json",
            _example_plan(example_role),
            "```",
            "",
            *rules,
            "",
            OUTPUT_RULE,
        ]
    )


HANDED_OVER = (
    "## A job written by hand\n\n"
    "The operator wrote this job as a list of tasks and has now handed it to you; no planner "
    "has judged it before, so there is no objective status yet. Tasks below that are CANCELLED "
    "with the error 'superseded by plan N' had not started: list the ids of those still "
    "worth doing in `unblocks` to run them as they are, and add `next_tasks` only for new "
    "work. Answer `satisfied` only if the finished tasks already meet the objective."
)


def fleet_section(agents: Sequence[FleetAgent], workstreams: Sequence[str]) -> str:
    """Who could do the work: a plan that asks for a role nobody takes, or for a model
    class nobody offers, would wait for ever."""
    lines = [
        f"- `{a.id}` ({a.provider}{f', model class {a.model_class}' if a.model_class else ''}): "
        f"{', '.join(a.roles) or 'no roles'}; {a.availability}"
        for a in agents
    ]
    text = "## Agents\n\n" + ("\n".join(lines) if lines else "No agents are defined.")
    if workstreams:
        named = ", ".join(f"`{w}`" for w in workstreams)
        text += f"\n\nWorkstreams in use (tasks in one run one at a time, in order): {named}."
    return text


def planner_prompt(
    *,
    objective: str,
    round: int,
    trigger: str,
    guidance: str | None,
    tasks: Sequence[TaskSummary],
    previous_assessment: str | None,
    rejection: str | None,
    roles: Collection[str],
    handed_over: bool = False,
    agents: Sequence[FleetAgent] = (),
    workstreams: Sequence[str] = (),
) -> str:
    """The whole planner prompt; a retry carries the rejection so the model can fix it.

    ``handed_over``: the job was written by hand as a list of tasks and this is its first
    planner round, so there is no earlier objective status to build on.
    """
    sections = [
        "# Relay planner",
        "You plan the next tasks of an autonomous job. Coding agents carry out each task in "
        "its own branch; tasks run when their dependencies have succeeded. Plan only what "
        "the results so far justify. Your working directory holds the job's code as it "
        "stands now (its branch at its head): read what you plan for; do not change it.",
        f"## Objective\n\n{objective.strip()}",
        f"## Planning round {round}\n\nTrigger: {trigger}",
    ]
    if handed_over:
        sections.append(HANDED_OVER)
    if guidance and guidance.strip():
        sections.append(f"## Operator guidance\n\n{guidance.strip()}")
    sections.append(f"## Tasks so far\n\n{task_section(tasks)}")
    sections.append(fleet_section(agents, workstreams))
    if previous_assessment and previous_assessment.strip():
        sections.append(f"## Previous assessment\n\n{_cap(previous_assessment, 4000)}")
    if rejection:
        sections.append(
            f"## Retry\n\nYour previous output was rejected: {rejection}\n\n"
            "Fix every problem listed and return the complete JSON object again."
        )
    sections.append(_planner_contract(roles))
    return "\n\n".join(sections) + "\n"


def _assessor_contract() -> str:
    example = {
        "decision": "continue",
        "summary": "Wave 2 delivered the parser and its tests; the plan still holds.",
        "findings": ["The parser rejects empty files, which the CLI task must handle."],
    }
    return (
        "## What to return\n\nReturn exactly one JSON object of this shape:\n\n"
        f"```json\n{json.dumps(example, indent=2)}\n```\n\n"
        '- `decision`: `"continue"` if the remaining plan still leads to the objective, '
        '`"replan"` if the planner must revise it.\n'
        "- `summary`: a few sentences on what this wave achieved.\n"
        "- `findings`: specific facts the planner should know (may be empty).\n\n"
        f"{OUTPUT_RULE}"
    )


ASSESSOR_CONTRACT = _assessor_contract()


def assessor_prompt(*, objective: str, wave: int, tasks: Sequence[TaskSummary]) -> str:
    """Asks whether the plan still leads to the objective after a wave finished (the task's
    input: its contract, :data:`ASSESSOR_CONTRACT`, is added last when the prompt is built)."""
    sections = [
        "# Relay assessor",
        f"Wave {wave} of an autonomous job has finished. Judge its results against the "
        "objective. Check the work itself in the repository where a summary is not enough.",
        f"## Objective\n\n{objective.strip()}",
        f"## Tasks\n\n{task_section(tasks)}",
    ]
    return "\n\n".join(sections) + "\n"
