from __future__ import annotations

import json
from typing import Any

import pytest

from relay_engine.contracts.planner import (
    ASSESSOR_CONTRACT,
    AssessorResult,
    PlanAccepted,
    PlannerResult,
    PlanRejected,
    TaskSummary,
    assessor_prompt,
    extract_json_object,
    materialise,
    planner_prompt,
    validate_assessor_output,
    validate_planner_output,
)
from relay_engine.contracts.task_definitions import TaskDef, definition_hash
from relay_engine.core.states import TaskState

ROLES = {"implementer", "reviewer"}


def plan(*tasks: dict[str, Any], status: str = "in_progress", **extra: Any) -> dict[str, Any]:
    return {"objective_status": status, "assessment": "ok", "next_tasks": list(tasks), **extra}


def check(raw: object, existing: set[str] | None = None) -> PlanAccepted | PlanRejected:
    return validate_planner_output(raw, existing_task_ids=existing or set(), known_roles=ROLES)


def rejected(raw: object, existing: set[str] | None = None) -> str:
    outcome = check(raw, existing)
    assert isinstance(outcome, PlanRejected), outcome
    assert "\n" not in outcome.reason
    return outcome.reason


def test_valid_plan_is_accepted_with_planner_field_names() -> None:
    raw = plan(
        {"id": "api", "title": "Build the API", "story_size": "L", "role": "implementer"},
        {"id": "review", "dependencies": ["api", "done-1"], "role": "reviewer", "kind": "review"},
        unblocks=["done-1"],
        chatter="models add fields like this",
    )
    outcome = check(raw, existing={"done-1"})
    assert isinstance(outcome, PlanAccepted)
    api, review = outcome.result.next_tasks
    assert api.size == "L" and api.title == "Build the API"
    assert review.depends_on == ["api", "done-1"] and review.title == "review"
    assert outcome.result.unblocks == ["done-1"]


def test_plan_in_a_final_message_is_found() -> None:
    message = "I looked around.\n```json\n" + json.dumps(plan({"id": "a"})) + "\n```\nBye!"
    outcome = check(message)
    assert isinstance(outcome, PlanAccepted)
    assert [t.id for t in outcome.result.next_tasks] == ["a"]


def test_satisfied_with_no_tasks_is_accepted() -> None:
    outcome = check({"objective_status": "satisfied", "assessment": "all done"})
    assert isinstance(outcome, PlanAccepted) and outcome.result.next_tasks == []


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("I could not decide what to do.", "no JSON object found"),
        ("", "output is empty"),
        ('{"objective_status": "in_progress", "next_tasks": [],}', "not valid JSON"),
        ("```json\n{'objective_status': 'satisfied'}\n```", "```json block is not valid JSON"),
        (["not", "an", "object"], "expected a JSON object, got list"),
        ({"assessment": "x"}, "objective_status: required field missing"),
        (plan({"id": "a"}, status="maybe"), "objective_status: Input should be"),
        (plan({"title": "no id"}), "next_tasks[0].id: required field missing"),
        (plan({"id": "a", "story_size": "XXL"}), "next_tasks[0] (a).story_size"),
        (plan({"id": "a", "description": "x"}), "next_tasks[0] (a).description: unknown field"),
        ({"objective_status": "in_progress", "next_tasks": "a, b"}, "next_tasks: must be a list"),
        (plan({"id": "a"}, {"id": "a"}), "next_tasks[1] (a).id: duplicate task id 'a'"),
        (plan({"id": "a", "dependencies": ["ghost"]}), "depends on unknown task 'ghost'"),
        (plan({"id": "a", "dependencies": ["a"]}), "task 'a' depends on itself"),
        (plan({"id": "a", "role": "poet"}), "next_tasks[0] (a).role: unknown role 'poet'"),
        (plan(), "in_progress but no next_tasks"),
        (plan({"id": "a"}, status="satisfied"), "'satisfied' but next_tasks is not empty"),
        (plan({"id": "a"}, unblocks=["ghost"]), "unblocks[0]: unknown task 'ghost'"),
    ],
)
def test_rejections_say_what_is_wrong(raw: object, reason: str) -> None:
    assert reason in rejected(raw)


def test_cycle_is_named() -> None:
    reason = rejected(
        plan(
            {"id": "a", "dependencies": ["b"]},
            {"id": "b", "dependencies": ["a"]},
        )
    )
    assert "next_tasks[0] (a).dependencies: dependency cycle: a -> b -> a" in reason


def test_every_problem_in_one_paragraph() -> None:
    reason = rejected(
        plan(
            {"id": "a", "dependencies": ["ghost"], "role": "poet"},
            {"id": "a"},
            {"id": "c", "story_size": "huge"},
        )
    )
    assert reason.startswith("4 problems: ")
    for part in ["'ghost'", "'poet'", "duplicate task id 'a'", "next_tasks[2] (c).story_size"]:
        assert part in reason


def test_existing_ids_may_be_depended_on_and_restated() -> None:
    outcome = check(plan({"id": "old"}, {"id": "new", "dependencies": ["old"]}), {"old"})
    assert isinstance(outcome, PlanAccepted)


# --- extract_json_object --------------------------------------------------------------------


def test_extract_with_chatter_around() -> None:
    text = 'Sure! Here is the plan: {"a": 1, "b": [1, 2]} Let me know.'
    assert extract_json_object(text) == {"a": 1, "b": [1, 2]}


def test_extract_nested_braces_and_braces_in_strings() -> None:
    text = 'Plan {"outer": {"inner": {"x": "}{ \\" {"}}, "s": "a } b"} end'
    assert extract_json_object(text) == {"outer": {"inner": {"x": '}{ " {'}}, "s": "a } b"}


def test_extract_skips_prose_braces() -> None:
    text = 'Replace {name} in the template, and a stray { here.\n{"ok": true}'
    assert extract_json_object(text) == {"ok": True}


def test_extract_last_object_wins() -> None:
    assert extract_json_object('first {"n": 1} then {"n": 2} done') == {"n": 2}


def test_extract_prefers_fenced_blocks() -> None:
    text = '```json\n{"n": 1}\n```\n```json\n{"n": 2}\n```\nSummary: {"n": 3}'
    assert extract_json_object(text) == {"n": 2}


def test_extract_falls_back_when_fence_is_broken() -> None:
    text = '```json\n{"n": 1,}\n```\nfixed: {"n": 4}'
    assert extract_json_object(text) == {"n": 4}


def test_extract_none_without_object() -> None:
    assert extract_json_object("no json [1, 2] here") is None
    assert extract_json_object("{broken") is None


# --- assessor -------------------------------------------------------------------------------


def test_assessor_output() -> None:
    text = 'Done.\n{"decision": "replan", "summary": "tests fail", "findings": ["x"], "extra": 1}'
    assert validate_assessor_output(text) == AssessorResult(
        decision="replan", summary="tests fail", findings=["x"]
    )
    bad = validate_assessor_output({"decision": "maybe"})
    assert isinstance(bad, PlanRejected) and "decision: Input should be" in bad.reason
    assert isinstance(validate_assessor_output("nothing"), PlanRejected)


# --- materialise ----------------------------------------------------------------------------


def test_materialise_create_unchanged_conflict() -> None:
    stored = TaskDef(id="stored", input="x")
    changed = TaskDef(id="changed", input="old")
    existing = {"stored": definition_hash(stored, "P2"), "changed": definition_hash(changed, "P2")}
    result = materialise(
        [TaskDef(id="stored", input="x"), TaskDef(id="changed", input="new"), TaskDef(id="n")],
        existing,
        "P2",
    )
    assert [t.id for t in result.create] == ["n"]
    assert result.unchanged == ("stored",)
    assert result.conflicts == ("changed",)
    assert not result.ok
    assert result.reason == "task changed already exists with a different definition"


def test_materialise_is_idempotent() -> None:
    tasks = [TaskDef(id="a"), TaskDef(id="b", depends_on=["a"], priority="P0")]
    first = materialise(tasks, {}, "P1")
    assert first.ok and first.create == tuple(tasks) and first.reason == ""
    stored = {t.id: definition_hash(t, "P1") for t in first.create}
    again = materialise(tasks, stored, "P1")
    assert again.create == () and again.unchanged == ("a", "b") and again.ok


def test_materialise_inherited_priority_matters() -> None:
    stored = {"a": definition_hash(TaskDef(id="a"), "P1")}
    assert materialise([TaskDef(id="a")], stored, "P3").conflicts == ("a",)


# --- prompts --------------------------------------------------------------------------------


def summaries() -> list[TaskSummary]:
    return [
        TaskSummary("schema", "Design schema", TaskState.SUCCEEDED, "Wrote docs/schema.md"),
        TaskSummary("api", "Build API", TaskState.FAILED, None, "tests failed: 3", "implementer"),
        TaskSummary("ui", "Build UI", TaskState.QUEUED, dependencies=("api",)),
    ]


def test_planner_prompt_contents() -> None:
    prompt = planner_prompt(
        objective="Ship search v2",
        round=3,
        trigger="wave 2 finished",
        guidance="Prefer small tasks.",
        tasks=summaries(),
        previous_assessment="The API is flaky.",
        rejection="1 problem: next_tasks: in_progress but no next_tasks.",
        roles=ROLES,
    )
    for part in [
        "Ship search v2",
        "round 3",
        "wave 2 finished",
        "Prefer small tasks.",
        "`schema` [SUCCEEDED]",
        "Wrote docs/schema.md",
        "`api` [FAILED]",
        "tests failed: 3",
        "depends on api",
        "The API is flaky.",
        "Your previous output was rejected: 1 problem: next_tasks: in_progress but no next_tasks.",
        "$RELAY_RESULT_FILE",
        "`implementer`, `reviewer`",
        '"objective_status"',
        '"story_size"',
        '"dependencies"',
    ]:
        assert part in prompt, part


def test_planner_prompt_example_is_itself_a_valid_plan() -> None:
    prompt = planner_prompt(
        objective="o",
        round=1,
        trigger="start",
        guidance=None,
        tasks=[],
        previous_assessment=None,
        rejection=None,
        roles=ROLES,
    )
    assert "rejected" not in prompt and "Operator guidance" not in prompt
    assert isinstance(check(prompt), PlanAccepted)


def test_planner_prompt_caps_long_histories() -> None:
    tasks = [TaskSummary(f"t{i}", f"task {i}", "SUCCEEDED", "x" * 2000) for i in range(250)]
    prompt = planner_prompt(
        objective="o",
        round=9,
        trigger="t",
        guidance=None,
        tasks=tasks,
        previous_assessment=None,
        rejection=None,
        roles=ROLES,
    )
    assert "`t249`" in prompt and "`t50`" in prompt and "`t49`" not in prompt
    assert prompt.index("`t249`") < prompt.index("`t50`")
    assert "50 older tasks" in prompt and "250 tasks" in prompt
    assert "x" * 500 not in prompt and "x" * 400 in prompt


def test_assessor_prompt_contents() -> None:
    prompt = assessor_prompt(objective="Ship search v2", wave=2, tasks=summaries())
    for part in ["Ship search v2", "Wave 2", "`api` [FAILED]"]:
        assert part in prompt
    assert isinstance(validate_assessor_output(ASSESSOR_CONTRACT), AssessorResult)


def test_planner_result_type() -> None:
    assert PlannerResult(objective_status="satisfied").next_tasks == []
