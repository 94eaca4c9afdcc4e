from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay_engine.contracts.job_file import JobFileError, JobSpec, load_job_file, parse_job_text
from relay_engine.contracts.task_definitions import (
    TaskDef,
    definition_hash,
    find_cycles,
    validate_graph,
)

FULL = """
[job]
id = "search-v2"
title = "Search, version two"
objective = "Replace the search backend"
repo = "../code/app"
base_branch = "develop"
priority = "P1"
mode = "autonomous"
wave_gate = "assess"
auto_merge = true
max_plan_rounds = 3
sim = { plan = [{ objective_status = "satisfied" }] }

[[tasks]]
id = "schema"
title = "Design the index schema"
input = "Write docs/schema.md"
role = "architect"
priority = "P0"
size = "S"
workstream = "backend"
max_attempts = 2
timeout = 900.0
agent = "claude-1"
kind = "work"
model_class = "strong"
sim = { exit = 0, summary = "done" }

[[tasks]]
id = "build"
depends_on = ["schema"]
kind = "review"
"""

MINIMAL = """
[job]
id = "j"

[[tasks]]
id = "a"

[[tasks]]
id = "b"
depends_on = ["a"]
"""


def write(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def rejection(tmp_path: Path, text: str, **known: object) -> str:
    path = write(tmp_path, text)
    with pytest.raises(JobFileError) as caught:
        load_job_file(path, **known)  # type: ignore[arg-type]
    assert caught.value.path == path
    assert all(line.startswith(f"{path}: ") for line in str(caught.value).splitlines())
    return str(caught.value)


def test_full_file_round_trips(tmp_path: Path) -> None:
    (tmp_path / "code" / "app").mkdir(parents=True)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    spec = load_job_file(write(jobs, FULL))
    job = spec.job
    assert (job.id, job.title, job.objective) == (
        "search-v2",
        "Search, version two",
        "Replace the search backend",
    )
    assert job.repo == str((tmp_path / "code" / "app").resolve())
    assert (job.base_branch, job.priority, job.mode, job.wave_gate) == (
        "develop",
        "P1",
        "autonomous",
        "assess",
    )
    assert job.auto_merge is True and job.max_plan_rounds == 3
    assert job.sim == {"plan": [{"objective_status": "satisfied"}]}
    schema, build = spec.tasks
    assert schema == TaskDef(
        id="schema",
        title="Design the index schema",
        input="Write docs/schema.md",
        role="architect",
        priority="P0",
        size="S",
        workstream="backend",
        max_attempts=2,
        timeout=900.0,
        agent="claude-1",
        kind="work",
        model_class="strong",
        sim={"exit": 0, "summary": "done"},
    )
    assert build.title == "build" and build.depends_on == ["schema"] and build.kind == "review"
    assert (build.role, build.size, build.max_attempts, build.priority) == (
        "implementer",
        "M",
        3,
        None,
    )
    assert spec.source == jobs / "job.toml"


def test_defaults_and_absolute_repo(tmp_path: Path) -> None:
    spec = load_job_file(write(tmp_path, MINIMAL))
    assert spec.job.title == "j" and spec.job.priority == "P2" and spec.job.mode == "manual"
    assert spec.job.repo is None and spec.job.wave_gate == "auto" and not spec.job.auto_merge
    absolute = tmp_path / "elsewhere"
    absolute.mkdir()
    text = MINIMAL.replace('id = "j"', f'id = "j"\nrepo = "{absolute}"')
    assert load_job_file(write(tmp_path, text)).job.repo == str(absolute)


def test_a_repo_that_is_not_there_is_refused_naming_the_path_as_resolved(tmp_path: Path) -> None:
    (tmp_path / "my-repo").mkdir()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    text = MINIMAL.replace('id = "j"', 'id = "j"\nrepo = "../my-rpeo"')
    with pytest.raises(JobFileError) as refused:
        load_job_file(write(jobs, text))
    assert str(refused.value) == (
        f"{jobs / 'job.toml'}: job.repo: {tmp_path / 'my-rpeo'} does not exist "
        "(repo = '../my-rpeo', from the file): no agent may run in a folder that is not there"
    )


def test_relative_repo_resolves_against_the_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jobs" / "repo").mkdir(parents=True)
    text = MINIMAL.replace('id = "j"', 'id = "j"\nrepo = "repo"')
    path = write(tmp_path / "jobs", text)
    monkeypatch.chdir(tmp_path)
    assert load_job_file(Path("jobs/job.toml")).job.repo == str(tmp_path.resolve() / "jobs/repo")
    assert parse_job_text(text, path).job.repo == "repo"


def test_bad_toml_gives_line_and_column(tmp_path: Path) -> None:
    text = rejection(tmp_path, '[job]\nid = "j"\nmode manual\n')
    assert "line 3, column 6" in text and "invalid TOML" in text


def test_missing_job_table(tmp_path: Path) -> None:
    assert "job: missing [job] table" in rejection(tmp_path, '[[tasks]]\nid = "a"\n')


@pytest.mark.parametrize(
    ("snippet", "field", "reason"),
    [
        ('[job]\nid = "j"\ncolour = "red"', "job.colour", "unknown field"),
        ('[job]\nid = "j"\n[[tasks]]\nid = "a"\ncolour = "red"', "tasks[0] (a).colour", "unknown"),
        ('[job]\nid = "j"\n[[tasks]]\nid = "a"\ndependson = []', "dependson", "'depends_on'"),
        ('[job]\nid = "j"\n[meta]\nx = 1', "meta", "unknown field"),
    ],
)
def test_unknown_fields_are_named(tmp_path: Path, snippet: str, field: str, reason: str) -> None:
    text = rejection(tmp_path, snippet + '\n[[tasks]]\nid = "zz"\n')
    assert field in text and reason in text


@pytest.mark.parametrize(
    ("task_line", "field", "reason"),
    [
        ('size = "XXL"', "tasks[0] (a).size", "'S', 'M', 'L' or 'XL'"),
        ('max_attempts = "3"', "tasks[0] (a).max_attempts", "valid integer"),
        ("max_attempts = 50", "tasks[0] (a).max_attempts", "less than or equal to 20"),
        ("timeout = -1", "tasks[0] (a).timeout", "greater than 0"),
        ('depends_on = "x"', "tasks[0] (a).depends_on", "valid list"),
        ('kind = "party"', "tasks[0] (a).kind", "'work'"),
    ],
)
def test_wrong_types_name_the_task_field(
    tmp_path: Path, task_line: str, field: str, reason: str
) -> None:
    text = rejection(tmp_path, f'[job]\nid = "j"\n[[tasks]]\nid = "a"\n{task_line}\n')
    assert f"{field}: " in text and reason in text


def test_wrong_job_field_type(tmp_path: Path) -> None:
    text = rejection(tmp_path, '[job]\nid = "j"\npriority = "P9"\n[[tasks]]\nid = "a"\n')
    assert "job.priority: Input should be 'P0', 'P1', 'P2' or 'P3' (got 'P9')" in text


@pytest.mark.parametrize("bad_id", ["../etc", "-x", "a b", "x" * 65, "a..b", "br.lock", ""])
def test_ids_unsafe_for_paths_and_branches_are_rejected(tmp_path: Path, bad_id: str) -> None:
    text = rejection(tmp_path, f'[job]\nid = "j"\n[[tasks]]\nid = "{bad_id}"\n')
    assert "tasks[0]" in text and ".id: must" in text


def test_duplicate_task_ids_name_both_positions(tmp_path: Path) -> None:
    text = rejection(tmp_path, MINIMAL + '\n[[tasks]]\nid = "a"\n')
    assert "tasks[2] (a).id: duplicate task id 'a' (also tasks[0])" in text


def test_unknown_dependency(tmp_path: Path) -> None:
    text = rejection(tmp_path, MINIMAL.replace('["a"]', '["a", "ghost"]'))
    assert "tasks[1] (b).depends_on: depends on unknown task 'ghost'" in text


def test_self_dependency(tmp_path: Path) -> None:
    text = rejection(tmp_path, MINIMAL.replace('["a"]', '["b"]'))
    assert "tasks[1] (b).depends_on: task 'b' depends on itself" in text


def test_cycle_is_named(tmp_path: Path) -> None:
    text = rejection(
        tmp_path,
        '[job]\nid = "j"\n'
        '[[tasks]]\nid = "a"\ndepends_on = ["c"]\n'
        '[[tasks]]\nid = "b"\ndepends_on = ["a"]\n'
        '[[tasks]]\nid = "c"\ndepends_on = ["b"]\n',
    )
    assert "tasks[0] (a).depends_on: dependency cycle: a -> c -> b -> a" in text


def test_unknown_role_and_agent_only_when_known_lists_given(tmp_path: Path) -> None:
    text = MINIMAL.replace('id = "a"', 'id = "a"\nrole = "poet"\nagent = "hal"')
    load_job_file(write(tmp_path, text))
    message = rejection(tmp_path, text, known_roles={"implementer"}, known_agents={"claude-1"})
    assert "tasks[0] (a).role: unknown role 'poet'" in message
    assert "tasks[0] (a).agent: unknown agent 'hal'" in message


def test_manual_job_needs_tasks(tmp_path: Path) -> None:
    assert "tasks: a manual job needs at least one" in rejection(tmp_path, '[job]\nid = "j"\n')


def test_autonomous_job_needs_objective(tmp_path: Path) -> None:
    text = rejection(tmp_path, '[job]\nid = "j"\nmode = "autonomous"\n')
    assert "job.objective: an autonomous job needs an objective" in text
    ok = write(tmp_path, '[job]\nid = "j"\nmode = "autonomous"\nobjective = "ship"\n', "ok.toml")
    assert load_job_file(ok).tasks == ()


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = rejection(
        tmp_path,
        '[job]\nid = "j"\npriority = "urgent"\n'
        '[[tasks]]\nid = "a"\nsize = "huge"\n'
        '[[tasks]]\nid = "b"\ndepends_on = ["a", "ghost"]\nrole = "poet"\n'
        '[[tasks]]\nid = "b"\ncolour = "red"\n',
        known_roles={"implementer"},
    )
    lines = text.splitlines()
    for expected in [
        "job.priority",
        "tasks[0] (a).size",
        "tasks[1] (b).depends_on: depends on unknown task 'ghost'",
        "tasks[1] (b).role",
        "tasks[2] (b).colour: unknown field",
    ]:
        assert any(expected in line for line in lines), expected
    assert not any("unknown task 'a'" in line for line in lines)  # a failed but exists


def test_missing_file_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(JobFileError, match="cannot read"):
        load_job_file(tmp_path / "absent.toml")
    path = tmp_path / "latin.toml"
    path.write_bytes(b'[job]\nid = "caf\xe9"\n')
    with pytest.raises(JobFileError, match="not UTF-8"):
        load_job_file(path)


def test_spec_hash_is_stable_and_sensitive(tmp_path: Path) -> None:
    first = load_job_file(write(tmp_path, MINIMAL, "one.toml"))
    second = load_job_file(write(tmp_path, "# same job\n" + MINIMAL, "two.toml"))
    assert first.spec_hash() == second.spec_hash()
    changes = [
        ('id = "j"', 'id = "k"'),
        ('id = "j"', 'id = "j"\npriority = "P0"'),
        ('id = "j"', 'id = "j"\nbase_branch = "dev"'),
        ('id = "b"', 'id = "b"\nsize = "L"'),
        ('id = "b"', 'id = "b"\ninput = "do it"'),
        ('id = "b"', 'id = "b"\nsim = { exit = 1 }'),
        ('["a"]', "[]"),
    ]
    hashes = {first.spec_hash()}
    for old, new in changes:
        spec = parse_job_text(MINIMAL.replace(old, new, 1), tmp_path / "x.toml")
        hashes.add(spec.spec_hash())
    assert len(hashes) == len(changes) + 1


def test_definition_hash_resolves_inherited_priority() -> None:
    inherited = TaskDef(id="a")
    assert definition_hash(inherited, "P1") == definition_hash(TaskDef(id="a", priority="P1"), "P1")
    assert definition_hash(inherited, "P1") != definition_hash(inherited, "P2")
    assert definition_hash(TaskDef(id="a", depends_on=["x", "y"]), "P2") == definition_hash(
        TaskDef(id="a", depends_on=["y", "x"]), "P2"
    )


def test_job_spec_is_frozen(tmp_path: Path) -> None:
    spec = load_job_file(write(tmp_path, MINIMAL))
    assert isinstance(spec, JobSpec)
    with pytest.raises(AttributeError):
        spec.tasks = ()  # type: ignore[misc]


# --- graph properties -----------------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> list[TaskDef]:
    """Tasks listed in a topological order: each depends only on tasks before it."""
    count = draw(st.integers(min_value=2, max_value=25))
    tasks = []
    for i in range(count):
        deps = draw(st.sets(st.integers(min_value=0, max_value=i - 1), max_size=4)) if i else []
        tasks.append(TaskDef(id=f"t{i}", depends_on=[f"t{d}" for d in sorted(deps)]))
    return tasks


@given(dags())
def test_random_dags_have_no_problems(tasks: list[TaskDef]) -> None:
    assert validate_graph(tasks, known_roles={"implementer"}, known_agents=set()) == []


@given(dags(), st.data())
def test_a_back_edge_makes_a_named_cycle(tasks: list[TaskDef], data: st.DataObject) -> None:
    # Link the last task to the first along a path, then close it with the back edge.
    lo = data.draw(st.integers(min_value=0, max_value=len(tasks) - 2))
    hi = data.draw(st.integers(min_value=lo + 1, max_value=len(tasks) - 1))
    tasks[hi] = tasks[hi].model_copy(update={"depends_on": [*tasks[hi].depends_on, f"t{lo}"]})
    tasks[lo] = tasks[lo].model_copy(update={"depends_on": [*tasks[lo].depends_on, f"t{hi}"]})
    problems = validate_graph(tasks, known_roles=None, known_agents=None)
    cycles = [p for p in problems if "dependency cycle" in p.message]
    assert cycles and not [p for p in problems if p not in cycles]
    named = cycles[0].message.removeprefix("dependency cycle: ").split(" -> ")
    assert named[0] == named[-1] and len(named) == len(set(named)) + 1
    by_id = {t.id: t for t in tasks}
    assert all(after in by_id[before].depends_on for before, after in pairwise(named))


def test_find_cycles_reports_each_tangle_once() -> None:
    graph = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["e"], "e": ["c"], "f": ["a"]}
    assert find_cycles(graph) == [["a", "b", "a"], ["c", "d", "e", "c"]]


def test_deep_chain_does_not_overflow() -> None:
    graph = {f"t{i}": [f"t{i + 1}"] for i in range(5000)} | {"t5000": ["t0"]}
    (cycle,) = find_cycles(graph)
    assert len(cycle) == 5002
