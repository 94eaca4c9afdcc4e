"""The one definition of a task, shared by job files and planner results.

Job files (TOML, written by people) and planner results (JSON, written by models) both end
up as :class:`TaskDef`, so they are checked by the same rules and hashed the same way: a task
resubmitted in a job file or re-proposed by a planner is recognised as the same task only if
its resolved definition is identical (:func:`definition_hash`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from relay_engine.contracts.inputs import size_text

Priority = Literal["P0", "P1", "P2", "P3"]
StorySize = Literal["S", "M", "L", "XL"]
TaskKind = Literal["work", "review", "assess", "merge_prep", "troubleshoot", "fix", "rebase"]

DEFAULT_PRIORITY: Priority = "P2"
MAX_ID_LENGTH = 64


_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_OTHER_JOB_TASK = re.compile(rf"{_ID_PATTERN.pattern}/{_ID_PATTERN.pattern}")


def _check_identifier(value: str) -> str:
    if len(value) > MAX_ID_LENGTH or not _ID_PATTERN.fullmatch(value):
        raise ValueError(
            f"must be 1-{MAX_ID_LENGTH} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    # Ids become path components and git branch names; git rejects "..", a trailing "."
    # and a trailing ".lock", so those are refused here instead of when the branch is made.
    if ".." in value or value.endswith((".", ".lock")):
        raise ValueError("must not contain '..' or end with '.' or '.lock'")
    return value


Identifier = Annotated[str, AfterValidator(_check_identifier)]
"""A job or task id: letters, digits, '.', '_', '-', starting with a letter or digit."""


class TaskDef(BaseModel):
    """A task as submitted; the engine adds state, attempts and results elsewhere."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: Identifier
    title: str = ""
    input: str = ""
    role: str = Field("implementer", min_length=1)
    priority: Priority | None = None
    size: StorySize = Field("M", validation_alias=AliasChoices("size", "story_size"))
    depends_on: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("depends_on", "dependencies")
    )
    workstream: str | None = None
    max_attempts: int = Field(3, ge=1, le=20)
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    agent: str | None = None
    kind: TaskKind = "work"
    model_class: str | None = None
    sim: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_title(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("title") and isinstance(data.get("id"), str):
            data = {**data, "title": data["id"]}
        return data

    @field_validator("depends_on")
    @classmethod
    def _dedupe_dependencies(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    def resolved_priority(self, job_priority: str | None) -> str:
        return self.priority or job_priority or DEFAULT_PRIORITY


def external_deps(depends_on: Iterable[str]) -> list[str]:
    """``JOB/TASK`` entries name another job's task; plain ids are the job's own tasks."""
    return [dep for dep in depends_on if "/" in dep]


def local_deps(depends_on: Iterable[str]) -> list[str]:
    return [dep for dep in depends_on if "/" not in dep]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values give equal text (and hashes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def resolved_definition(task: TaskDef, job_priority: str | None) -> dict[str, Any]:
    """The task as it will run: priority inherited, dependencies in a fixed order."""
    data = task.model_dump(mode="json")
    data["priority"] = task.resolved_priority(job_priority)
    data["depends_on"] = sorted(task.depends_on)
    return data


def definition_hash(task: TaskDef, job_priority: str | None) -> str:
    """sha256 of the resolved definition: equal hashes mean resubmitting changes nothing."""
    payload = canonical_json(resolved_definition(task, job_priority))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --- problems -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located by a field path like ``tasks[3] (build).role``."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def item_label(prefix: str, index: int, raw: object) -> str:
    """``tasks[3] (build)`` when the entry's id is readable, else ``tasks[3]``."""
    label = f"{prefix}[{index}]"
    task_id = (
        raw.id if isinstance(raw, TaskDef) else raw.get("id") if isinstance(raw, dict) else None
    )
    if isinstance(task_id, str) and task_id:
        label += f" ({task_id})"
    return label


def _accepted_names(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.extend(choice for choice in alias.choices if isinstance(choice, str))
        else:
            names.append(name)
    return names


def _render_loc(prefix: str, loc: Iterable[int | str]) -> str:
    text = prefix
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short_repr(value: object) -> str | None:
    if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 60):
        return repr(value)
    return None


def _unknown_field_message(name: str, accepted: list[str]) -> str:
    if name in accepted:
        return "another name for a field given already; give only one"
    close = difflib.get_close_matches(name, accepted, n=1)
    if close:
        return f"unknown field (did you mean {close[0]!r}?)"
    return f"unknown field (allowed: {', '.join(accepted)})" if accepted else "unknown field"


def validation_problems(
    error: ValidationError, prefix: str, model: type[BaseModel] | None = None
) -> list[Problem]:
    """Pydantic errors as Problems with readable paths; unknown fields get a suggestion."""
    problems: list[Problem] = []
    accepted = _accepted_names(model) if model is not None else []
    for err in error.errors(include_url=False):
        field = _render_loc(prefix, err["loc"])
        if err["type"] == "extra_forbidden":
            message = _unknown_field_message(str(err["loc"][-1]), accepted)
        elif err["type"] == "missing":
            message = "required field missing"
        else:
            message = err["msg"].removeprefix("Value error, ")
            shown = _short_repr(err.get("input"))
            if shown is not None:
                message += f" (got {shown})"
        problems.append(Problem(field, message))
    return problems


# --- graph ----------------------------------------------------------------------------------


def _strongly_connected(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Tarjan's algorithm without recursion (job graphs may be deep chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child_pos = work.pop()
            if child_pos == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = graph[node]
            if child_pos < len(children):
                work.append((node, child_pos + 1))
                child = children[child_pos]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _cycle_through(start: str, graph: Mapping[str, Sequence[str]], members: set[str]) -> list[str]:
    """Shortest cycle from ``start`` back to itself inside one strongly connected component."""
    came_from = {start: start}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in graph[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError("a strongly connected component always has a cycle")


def find_cycles(dependencies: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One named cycle per tangle, each like ``[a, b, c, a]`` (a depends on b ...).

    Self-dependencies are left out: callers report those with a clearer message.
    """
    order = {node: i for i, node in enumerate(dependencies)}
    graph = {
        node: [d for d in dict.fromkeys(deps) if d in order and d != node]
        for node, deps in dependencies.items()
    }
    cycles = []
    for component in _strongly_connected(graph):
        if len(component) > 1:
            start = min(component, key=order.__getitem__)
            cycles.append(_cycle_through(start, graph, set(component)))
    cycles.sort(key=lambda cycle: order[cycle[0]])
    return cycles


def _named(values: Collection[str]) -> str:
    return ", ".join(sorted(values)) or "none"


def _task_problems(
    label: str,
    task: TaskDef,
    known_ids: Collection[str],
    known_roles: Collection[str] | None,
    known_agents: Collection[str] | None,
    other_jobs: bool = False,
) -> list[Problem]:
    problems = []
    for dep in task.depends_on:
        if "/" in dep:
            if not other_jobs:
                problems.append(
                    Problem(f"{label}.depends_on", f"{dep!r}: only ids of this job's tasks")
                )
            elif not _OTHER_JOB_TASK.fullmatch(dep):
                problems.append(Problem(f"{label}.depends_on", f"{dep!r} is not JOB/TASK"))
        elif dep == task.id:
            problems.append(Problem(f"{label}.depends_on", f"task {task.id!r} depends on itself"))
        elif dep not in known_ids:
            problems.append(Problem(f"{label}.depends_on", f"depends on unknown task {dep!r}"))
    if known_roles is not None and task.role not in known_roles:
        message = f"unknown role {task.role!r} (known roles: {_named(known_roles)})"
        problems.append(Problem(f"{label}.role", message))
    if known_agents is not None and task.agent is not None and task.agent not in known_agents:
        message = f"unknown agent {task.agent!r} (known agents: {_named(known_agents)})"
        problems.append(Problem(f"{label}.agent", message))
    return problems


def _input_problems(label: str, task: TaskDef, max_bytes: int | None) -> list[Problem]:
    size = len(task.input.encode("utf-8", "surrogatepass"))
    if max_bytes is None or size <= max_bytes:
        return []
    message = (
        f"{size_text(size)}, over the {size_text(max_bytes)} limit "
        "([inputs] max_task_input_bytes in relay.toml): put long material in a file "
        "in the repository and name it in the input"
    )
    return [Problem(f"{label}.input", message)]


def validate_graph(
    tasks: Sequence[TaskDef],
    *,
    existing_ids: Collection[str] = (),
    known_roles: Collection[str] | None = None,
    known_agents: Collection[str] | None = None,
    field_prefix: str = "tasks",
    positions: Sequence[int] | None = None,
    other_jobs: bool = False,
    max_input_bytes: int | None = None,
) -> list[Problem]:
    """Every problem with a set of tasks taken together, in input order, cycles last.

    ``existing_ids`` are tasks that dependencies may also name (already stored for the job).
    ``other_jobs`` lets dependencies name other jobs' tasks as ``JOB/TASK`` (job files do;
    whether those exist is checked at submit, against the database).
    ``known_roles`` / ``known_agents`` of None skip those checks. ``positions`` gives each
    task's index in its source list when some entries were dropped before this call, so the
    reported field paths still point at the right entry. ``max_input_bytes`` caps each
    task's input (an input that big could not even be passed on a command line).
    """
    indexes = list(positions) if positions is not None else list(range(len(tasks)))
    labels = [item_label(field_prefix, i, task) for i, task in zip(indexes, tasks, strict=True)]
    first_seen: dict[str, int] = {}
    problems: list[Problem] = []
    for pos, task in enumerate(tasks):
        if task.id in first_seen:
            other = f"{field_prefix}[{indexes[first_seen[task.id]]}]"
            problems.append(
                Problem(f"{labels[pos]}.id", f"duplicate task id {task.id!r} (also {other})")
            )
        else:
            first_seen[task.id] = pos
    known_ids = set(first_seen) | set(existing_ids)
    for pos, task in enumerate(tasks):
        problems += _task_problems(
            labels[pos], task, known_ids, known_roles, known_agents, other_jobs
        )
        problems += _input_problems(labels[pos], task, max_input_bytes)
    graph = {task_id: tasks[pos].depends_on for task_id, pos in first_seen.items()}
    for cycle in find_cycles(graph):
        label = labels[first_seen[cycle[0]]]
        problems.append(Problem(f"{label}.depends_on", f"dependency cycle: {' -> '.join(cycle)}"))
    return problems
