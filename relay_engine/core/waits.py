"""What a task or job waits for, until when, and the command that releases it.

``relay status`` notes each wait on its row, the console shows it, and ``relay run
--until-idle`` prints one line per wait when nothing else is left to do (exit 3), so an
operator coming back to an unattended run knows exactly what to type.

Pure: the facts come from the read model's views.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from relay_engine.contracts.config import PROVIDERS
from relay_engine.contracts.time_format import format_time
from relay_engine.core.budgets import BUDGET
from relay_engine.core.states import JobState, TaskState


@dataclass(frozen=True)
class Wait:
    subject: str  # "task j/t", "job j"
    what: str  # what it waits for, in words
    until: float | None  # when it goes on by itself; None: when someone acts
    release: str  # the command that releases it now ("" when nothing need be done)

    def line(self) -> str:
        return f"{self.subject} {'wait' if ',' in self.subject else 'waits'} for {self.note()}"

    def note(self) -> str:
        """What it waits for, until when, and what releases it: a status row's note."""
        when = f" until {format_time(self.until)}" if self.until is not None else ""
        return f"{self.what}{when}" + (f": {self.release}" if self.release else "")


@dataclass(frozen=True)
class TaskFacts:
    key: str
    job_id: str
    state: str
    wave: int
    waiting_on_provider: str | None = None
    not_before: float | None = None
    error: str | None = None
    held_by: str | None = None


GateState = Literal["operator", "assess", "held"]


def task_wait(task: TaskFacts, *, gate: GateState | None = None) -> Wait | None:
    """The wait of one task, or None when it is not waiting (or its job's wait covers it).

    ``gate``: how the wave gate that holds this DRAFT task opens: the operator approves it,
    an assessor is judging the wave before, or its assessment failed and holds it closed."""
    subject = f"task {task.key}"
    if task.state == TaskState.HELD:
        return Wait(subject, f"{task.held_by or 'the operator'} (held)", None,
                    f"relay handback {task.key} --done, or --continue TEXT")  # fmt: skip
    if task.state == TaskState.DRAFT and gate is not None:
        return _gate_wait(subject, task, gate)
    if task.state != TaskState.PARKED:
        return None
    on = task.waiting_on_provider or ""
    if on == BUDGET:
        release = "" if task.not_before else f"relay budget {task.job_id} --add DOLLARS"
        return Wait(subject, task.error or "a budget", task.not_before, release)
    if on in PROVIDERS:
        return Wait(subject, f"{on}'s usage limit to reset", task.not_before, "")
    reason = task.error or f"agent {on}"
    return Wait(subject, reason, task.not_before, f"relay agents reset {on}" if on else "")


@dataclass(frozen=True)
class AgentHome:
    """An engine that defines an agent, as the engines registry says."""

    engine_id: str
    host: str
    live: bool


def pinned_wait(
    key: str, agent: str, homes: Sequence[AgentHome], *, workstream: str | None = None
) -> Wait | None:
    """A queued task pinned to ``agent`` (itself, or through its ``workstream``'s pin) waits
    while no live engine defines that agent: only such an engine claims it. None while one
    does (it is only queued)."""
    if any(home.live for home in homes):
        return None
    if homes:
        named = ", ".join(f"engine {h.engine_id} on {h.host}" for h in homes[:2])
        more = f" and {len(homes) - 2} more" if len(homes) > 2 else ""
        what = f"agent {agent} (defined on {named}{more}, not running)"
    else:
        what = f"agent {agent} (defined on no engine)"
    job, _, _ = key.partition("/")
    target = f"{job} {workstream}" if workstream else key
    release = f"relay run where agent {agent} is defined, or relay pin {target} ANOTHER_AGENT"
    return Wait(f"task {key}", what, None, release)


def _gate_wait(subject: str, task: TaskFacts, gate: GateState) -> Wait:
    job = task.job_id
    if gate == "assess":
        return Wait(subject, f"the assessment of wave {task.wave - 1}", None, "")
    if gate == "held":
        return Wait(subject, f"approval of wave {task.wave} (its gate's assessment failed)",
                    None, f"relay approve {job}, or relay replan {job}")  # fmt: skip
    return Wait(subject, f"approval of wave {task.wave}", None, f"relay approve {job}")


def wait_lines(waits: Sequence[Wait], *, names: int = 3) -> list[str]:
    """One line per distinct wait: twenty tasks of a gated wave are one line naming a few."""
    groups: dict[tuple[str, str, float | None, str], list[str]] = {}
    for wait in waits:
        kind, _, name = wait.subject.partition(" ")
        groups.setdefault((kind, wait.what, wait.until, wait.release), []).append(name)
    lines = []
    for (kind, what, until, release), subjects in groups.items():
        shown = ", ".join(subjects[:names])
        more = f" and {len(subjects) - names} more" if len(subjects) > names else ""
        plural = "s" if len(subjects) > 1 else ""
        lines.append(Wait(f"{kind}{plural} {shown}{more}", what, until, release).line())
    return lines


def job_wait(
    job_id: str, state: str, blocked_by: str | None, after: Collection[str] = ()
) -> Wait | None:
    """A BLOCKED job waits for the operator (its reason names the ways out); a DRAFT job
    for the jobs it comes after."""
    if state == JobState.BLOCKED:
        cause, _, ways = (blocked_by or "").partition("; ")
        return Wait(f"job {job_id}", f"you: {cause or 'a task failed'}", None, ways)
    if state == JobState.DRAFT and after:
        upstream = ", ".join(after)
        return Wait(f"job {job_id}", f"job {upstream}" + (f" ({blocked_by})" if blocked_by else ""),
                    None, "")  # fmt: skip
    return None
