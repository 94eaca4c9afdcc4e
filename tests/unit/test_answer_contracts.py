"""Every prompt states exactly one way to answer, and states it last.

A reviewer told "return exactly this verdict JSON" and then "When you finish: a JSON
object with a summary field" is rejected for following the last line it read, until its
attempts run out. So each prompt relay builds carries one output contract, at its end.
"""

from __future__ import annotations

from typing import get_args

import pytest

from relay_engine.contracts.planner import (
    AssessorResult,
    TaskSummary,
    assessor_prompt,
    planner_prompt,
    validate_assessor_output,
)
from relay_engine.contracts.prompts import PromptParts, answer_contract, assemble_prompt
from relay_engine.contracts.review import (
    ReviewInput,
    ReviewResult,
    review_prompt,
    validate_review_output,
)
from relay_engine.contracts.task_definitions import TaskKind

CONTRACT_MARKERS = ("$RELAY_RESULT_FILE", "## What to return", "## When you finish")
TASKS = [TaskSummary("api", "Build the API", "SUCCEEDED", result_summary="done")]


def contracts_in(prompt: str) -> int:
    return sum(prompt.count(marker) for marker in CONTRACT_MARKERS)


def task_input(kind: str) -> str:
    if kind == "review":
        parts = ReviewInput(
            title="t", base_branch="main", head_branch="relay/t", head_sha="ab" * 20,
            diffstat="", diff="+x\n", round=1, tasks=TASKS,
        )  # fmt: skip
        return review_prompt(parts, diff_limit=1000)
    if kind == "assess":
        return assessor_prompt(objective="ship it", wave=1, tasks=TASKS)
    return "Do the thing."


@pytest.mark.parametrize("kind", get_args(TaskKind))
def test_each_task_prompt_ends_with_its_one_contract(kind: str) -> None:
    contract = answer_contract(kind)
    parts = PromptParts(
        task_key=f"j/{kind}", title=kind, input=task_input(kind), role="implementer", kind=kind,
        objective="ship it", overlays=["## House rules\nBe brief."], contract=contract,
    )  # fmt: skip
    prompt = assemble_prompt(parts)
    assert prompt.rstrip().endswith(contract.rstrip())
    assert prompt.count("$RELAY_RESULT_FILE") == 1
    assert contracts_in(prompt) == contracts_in(contract) == 2


def test_the_planner_prompt_ends_with_its_one_contract() -> None:
    prompt = planner_prompt(
        objective="ship it", round=2, trigger="continuation", guidance=None, tasks=TASKS,
        previous_assessment="ok", rejection="next_tasks[0].role: no agent", roles=["implementer"],
    )  # fmt: skip
    assert prompt.count("$RELAY_RESULT_FILE") == 1
    assert contracts_in(prompt) == 2
    assert prompt.index("## What to return") > prompt.index("## Retry")


def test_each_contract_s_own_example_is_an_answer_it_accepts() -> None:
    assert isinstance(validate_review_output(answer_contract("review")), ReviewResult)
    assert isinstance(validate_assessor_output(answer_contract("assess")), AssessorResult)
