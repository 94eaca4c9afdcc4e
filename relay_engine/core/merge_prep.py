"""Merge preparation: a job's branch made ready to merge -- the moved base merged in and the
repository's checks (``[git] merge_checks``) passing -- before relay merges it.

A ``merge_prep`` task (an agent) works in a worktree of the job branch at its head with the
base being merged in; after the agent exits, the repository's checks run in the same
sandbox, within the run's timeout (:mod:`relay_engine.agents.merge_checks`), and their
record decides whether the attempt succeeded (:func:`judge_checks`). A preparation that
fails for good blocks the job with the failing check named, and the operator's ways out.

Pure: the check record is handed in as text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from relay_engine.core.outcomes import Outcome, OutcomeKind

KIND = "merge_prep"
RECORD_FILE = "merge-checks.json"  # in the run's agent/ folder
LOG_FILE = "merge-checks.log"  # the checks' own output, next to it
MAX_PREPARATIONS = 3
"""merge_prep tasks a job may queue before relay stops preparing and waits on the operator."""
OUTPUT_TAIL_CHARS = 1500


@dataclass(frozen=True)
class CheckRun:
    command: str
    exit_code: int | None  # None: it could not start
    tail: str = ""  # the end of what it printed
    error: str = ""  # why it could not start


def record_json(runs: Sequence[CheckRun], agent_exit: int) -> str:
    return json.dumps(
        {"agent_exit": agent_exit, "checks": [run.__dict__ for run in runs]}, ensure_ascii=False
    )


def parse_record(text: str | None) -> list[CheckRun] | None:
    """The checks' record; None when there is none or it cannot be read."""
    if not text:
        return None
    try:
        return [CheckRun(**row) for row in json.loads(text)["checks"]]
    except (ValueError, TypeError, KeyError):
        return None


def judge_checks(outcome: Outcome, checks: Sequence[str], runs: list[CheckRun] | None) -> Outcome:
    """A merge preparation the agent finished succeeds only when every check passed; the
    first one that failed becomes the attempt's error (the retry's prompt carries it)."""
    if outcome.kind is not OutcomeKind.SUCCEEDED or not checks:
        return outcome
    if runs is None:
        return _failed(outcome, "the merge checks left no record: they did not run to the end")
    by_command = {run.command: run for run in runs}
    for check in checks:
        run = by_command.get(check)
        if run is None:
            return _failed(outcome, f"merge check `{check}` did not run")
        if run.exit_code != 0:
            said = run.error or run.tail.strip()[-OUTPUT_TAIL_CHARS:] or "(no output)"
            code = "could not start" if run.exit_code is None else f"exit {run.exit_code}"
            return _failed(outcome, f"merge check `{check}` failed ({code}):\n{said}")
    return outcome


def _failed(outcome: Outcome, error: str) -> Outcome:
    return replace(outcome, kind=OutcomeKind.FAILED, error=error)


def needs_preparation(checks_configured: bool, head: str | None, prepared_head: str | None) -> bool:
    """Whether ``head`` must be prepared before it merges: only where the repository has
    checks, and only until a preparation succeeded at that very head."""
    return checks_configured and head is not None and prepared_head != head
