"""TOML job files: a ``[job]`` table and an array of ``[[tasks]]``.

A job file is rejected whole, with every problem listed at once, so an operator fixes the
file in one pass instead of resubmitting it once per typo.

Pure except :func:`load_job_file`, which reads the file and resolves the repo path.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from relay_engine.contracts.inputs import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TASK_INPUT_BYTES,
    InputTooLarge,
    check_toml_shape,
    read_capped,
)
from relay_engine.contracts.numbers import COUNT_MAX
from relay_engine.contracts.schedules import CatchUp, ScheduleRule, schedule_problems
from relay_engine.contracts.task_definitions import (
    Identifier,
    Priority,
    Problem,
    TaskDef,
    canonical_json,
    item_label,
    resolved_definition,
    validate_graph,
    validation_problems,
)


class JobDef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Identifier
    title: str = ""
    objective: str = ""
    repo: str | None = Field(None, min_length=1)
    base_branch: str = Field("main", min_length=1)
    priority: Priority = "P2"
    mode: Literal["manual", "autonomous"] = "manual"
    wave_gate: Literal["auto", "assess", "operator"] = "auto"
    auto_merge: bool = False
    review: bool = True  # a final review before the job's branch may be merged
    max_review_rounds: int = Field(3, ge=1, le=20)
    sim: dict[str, Any] | None = None
    max_plan_rounds: int = Field(5, ge=1, le=100)
    after: list[Identifier] = Field(default_factory=list)
    troubleshoot: bool = True
    budget_usd: float | None = Field(None, ge=0)
    budget_tokens: int | None = Field(None, ge=0, le=COUNT_MAX)
    schedule: str | None = None  # a cron expression: the file is a template, run per slot
    timezone: str = "UTC"
    catch_up: CatchUp = "last"

    @model_validator(mode="before")
    @classmethod
    def _default_title(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("title") and isinstance(data.get("id"), str):
            data = {**data, "title": data["id"]}
        return data


FIELDS_SINCE_0_1 = (
    "review",
    "max_review_rounds",
    "after",
    "troubleshoot",
    "budget_usd",
    "budget_tokens",
    "schedule",
    "timezone",
    "catch_up",
)
"""Job fields newer than the first release; see :meth:`JobSpec.spec_hash`."""


@dataclass(frozen=True)
class JobSpec:
    job: JobDef
    tasks: tuple[TaskDef, ...]
    source: Path

    def spec_hash(self) -> str:
        """Equal for files that mean the same job, wherever they live (source is left out).

        Fields added after relay 0.1.0 count only when set away from their default, so a
        job file stored by an older release still resubmits as "unchanged"."""
        job = self.job.model_dump(mode="json")
        for name in FIELDS_SINCE_0_1:
            if job[name] == JobDef.model_fields[name].get_default(call_default_factory=True):
                del job[name]
        payload = {
            "job": job,
            "tasks": [resolved_definition(t, self.job.priority) for t in self.tasks],
        }
        return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


class JobFileError(ValueError):
    """A job file that cannot be accepted; ``problems`` lists every reason."""

    def __init__(self, path: Path, problems: Sequence[Problem]) -> None:
        self.path = path
        self.problems = list(problems)
        super().__init__("\n".join(f"{path}: {problem}" for problem in self.problems))


_TOML_POSITION = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)$")


def _toml_problem(error: tomllib.TOMLDecodeError, text: str) -> Problem:
    message = str(error)
    match = _TOML_POSITION.search(message)
    if match is None:
        return Problem("toml", f"invalid TOML: {message}")
    where = match.group(1)
    if where == "end of document":
        where = f"line {text.count(chr(10)) + 1} (end of file)"
    return Problem(where, f"invalid TOML: {message[: match.start()]}")


def _split_document(data: dict[str, Any]) -> tuple[Any, list[Any], list[Problem]]:
    problems = [
        Problem(key, "unknown field (a job file has only [job] and [[tasks]])")
        for key in data
        if key not in ("job", "tasks")
    ]
    job = data.get("job")
    if job is None:
        problems.append(Problem("job", "missing [job] table"))
    elif not isinstance(job, dict):
        problems.append(Problem("job", "must be a table ([job])"))
    tasks = data.get("tasks", [])
    if not isinstance(tasks, list):
        problems.append(Problem("tasks", "must be an array of tables ([[tasks]])"))
        tasks = []
    return job, tasks, problems


def _parse_job(raw: Any) -> tuple[JobDef | None, list[Problem]]:
    if not isinstance(raw, dict):
        return None, []
    try:
        return JobDef.model_validate(raw, strict=True), []
    except ValidationError as error:
        return None, validation_problems(error, "job", JobDef)


def _parse_tasks(raws: list[Any]) -> tuple[list[TaskDef], list[int], list[Problem], set[str]]:
    """Valid tasks with their positions, problems, and ids of entries that failed."""
    tasks: list[TaskDef] = []
    positions: list[int] = []
    problems: list[Problem] = []
    failed_ids: set[str] = set()
    for index, raw in enumerate(raws):
        label = item_label("tasks", index, raw)
        if not isinstance(raw, dict):
            problems.append(Problem(label, "must be a table ([[tasks]])"))
            continue
        try:
            tasks.append(TaskDef.model_validate(raw, strict=True))
            positions.append(index)
        except ValidationError as error:
            problems += validation_problems(error, label, TaskDef)
            if isinstance(raw.get("id"), str):
                failed_ids.add(raw["id"])
    return tasks, positions, problems, failed_ids


def _job_rules(job: JobDef, tasks: list[Any]) -> list[Problem]:
    problems = []
    if job.mode == "manual" and not tasks:
        problems.append(Problem("tasks", "a manual job needs at least one [[tasks]] entry"))
    if job.mode == "autonomous" and not job.objective.strip():
        problems.append(Problem("job.objective", "an autonomous job needs an objective"))
    rule = schedule_rule(job)
    if rule is not None:
        problems += [Problem(f"job.{field}", text) for field, text in schedule_problems(rule)]
    elif job.timezone != "UTC" or job.catch_up != "last":
        field = "timezone" if job.timezone != "UTC" else "catch_up"
        problems.append(Problem(f"job.{field}", "only means something with job.schedule"))
    return problems


def schedule_rule(job: JobDef) -> ScheduleRule | None:
    """The template's timing, for a job file with ``schedule``; None for a plain job."""
    if job.schedule is None:
        return None
    return ScheduleRule(job.schedule, job.timezone, job.catch_up)


def parse_job_text(
    text: str,
    source: Path,
    *,
    known_roles: Collection[str] | None = None,
    known_agents: Collection[str] | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_input_bytes: int = DEFAULT_MAX_TASK_INPUT_BYTES,
) -> JobSpec:
    """Parse and check a job file's text; ``repo`` is kept as written (see load_job_file).

    Size and nesting are checked before the TOML parser runs (see :mod:`inputs`).
    """
    try:
        check_toml_shape(text, max_bytes=max_bytes)
        data = tomllib.loads(text)
    except InputTooLarge as error:
        raise JobFileError(source, [Problem("", str(error))]) from None
    except tomllib.TOMLDecodeError as error:
        raise JobFileError(source, [_toml_problem(error, text)]) from None
    raw_job, raw_tasks, problems = _split_document(data)
    job, job_problems = _parse_job(raw_job)
    tasks, positions, task_problems, failed_ids = _parse_tasks(raw_tasks)
    problems += job_problems + task_problems
    problems += validate_graph(
        tasks,
        existing_ids=failed_ids,
        known_roles=known_roles,
        known_agents=known_agents,
        positions=positions,
        other_jobs=True,
        max_input_bytes=max_input_bytes,
    )
    if job is not None:
        problems += _job_rules(job, raw_tasks)
    if problems or job is None:
        raise JobFileError(source, problems)
    return JobSpec(job=job, tasks=tuple(tasks), source=source)


def load_job_file(
    path: Path,
    *,
    known_roles: Collection[str] | None = None,
    known_agents: Collection[str] | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_input_bytes: int = DEFAULT_MAX_TASK_INPUT_BYTES,
) -> JobSpec:
    """Read a job file; a relative ``repo`` is taken relative to the file's directory."""
    path = Path(path).expanduser().resolve()
    try:
        text = read_capped(path, max_bytes)
    except InputTooLarge as error:
        raise JobFileError(path, [Problem("", str(error))]) from None
    except OSError as error:
        raise JobFileError(path, [Problem("", f"cannot read: {error.strerror}")]) from None
    except UnicodeDecodeError as error:
        raise JobFileError(path, [Problem("", f"not UTF-8 text: {error.reason}")]) from None
    spec = parse_job_text(
        text,
        path,
        known_roles=known_roles,
        known_agents=known_agents,
        max_bytes=max_bytes,
        max_input_bytes=max_input_bytes,
    )
    if spec.job.repo is not None:
        repo = (path.parent / Path(spec.job.repo).expanduser()).resolve()
        if not repo.is_dir():
            what = "is not a directory" if repo.exists() else "does not exist"
            written = Path(spec.job.repo).expanduser()
            relative = (
                "" if written.is_absolute() else f" (repo = {spec.job.repo!r}, from the file)"
            )
            problem = f"{repo} {what}{relative}: no agent may run in a folder that is not there"
            raise JobFileError(path, [Problem("job.repo", problem)])
        spec = JobSpec(spec.job.model_copy(update={"repo": str(repo)}), spec.tasks, spec.source)
    return spec


def stored_spec(spec: JobSpec) -> dict[str, Any]:
    """A template's job and tasks as JSON, so each run is made from what was submitted even
    when the file has changed or gone since."""
    return {
        "job": spec.job.model_dump(mode="json"),
        "tasks": [task.model_dump(mode="json") for task in spec.tasks],
    }


def spec_from_stored(stored: dict[str, Any], source: Path) -> JobSpec:
    """The inverse of :func:`stored_spec` (checked again: a stored spec is still input)."""
    job = JobDef.model_validate(stored["job"])
    tasks = tuple(TaskDef.model_validate(task) for task in stored["tasks"])
    return JobSpec(job=job, tasks=tasks, source=source)
