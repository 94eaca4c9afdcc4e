"""The troubleshooter's contract: what it is told to answer, and checking the answer.

A troubleshooter answers with JSON, the way planners do: ``{"verdict": "retry" |
"replan" | "give_up", "guidance": "…", "reason": "…"}`` (see
:mod:`relay_engine.ops.troubleshoot` for what each verdict does).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

KIND = "troubleshoot"
ROLE = "troubleshooter"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict: Literal["retry", "replan", "give_up"]
    guidance: str = ""
    reason: str = ""


def parse_verdict(raw: object) -> Verdict | str:
    """The troubleshooter's answer, or why it cannot be used."""
    if not isinstance(raw, dict):
        return "no JSON object with a verdict in the result"
    try:
        return Verdict.model_validate(raw)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"]) or "answer"
        return f"{where}: {problem['msg']}"


CONTRACT = (
    "## When you finish\n"
    "Do not change the repository. Write one JSON object to the file named by "
    "$RELAY_RESULT_FILE (or end your final message with it in a ```json block):\n"
    '`{"verdict": "retry" | "replan" | "give_up", "guidance": "...", "reason": "..."}`\n'
    "- `retry`: the task can succeed; `guidance` goes into its next prompt.\n"
    "- `replan`: the plan itself is wrong; `guidance` goes to the job's planner.\n"
    "- `give_up`: nobody can make this work now; `reason` says why, for the operator."
)
