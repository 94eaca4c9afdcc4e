"""Needs you, with the real claude: it asks relay before it acts, relay's rules answer what
they can, the operator answers the rest from another process, and what nobody answers in
time is denied so the session goes on. claude runs whole sessions under relay against the
scripted model stub (``ANTHROPIC_BASE_URL`` and a dummy key in the agent's env).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import Workspace, init_repo, job_toml, running_engine, tasks, wait_for
from modelstub import KEY, ModelStub, call, say

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
ALLOWED = "python3 -c \"open('allowed.txt', 'w').write('by a rule')\""
ASKED = "node -e \"require('fs').writeFileSync('asked.txt', 'by the operator')\""
DENIED = "sh -c 'echo no > denied.txt'"


def claude_agent(cli_bin: Path, home: Path, stub: ModelStub) -> dict[str, Any]:
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": stub.url,
        "ANTHROPIC_API_KEY": KEY,
        "HOME": str(home),
        "CLAUDE_CODE_MAX_RETRIES": "1",
    }
    return {"id": "claude-main", "provider": "claude", "command": [str(cli_bin / "claude")],
            "env": env, "roles": ["implementer"]}  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def workspace_with(tmp_path: Path, cli_bin: Path, stub: ModelStub, **permissions: Any) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    ws.configure(agents=[claude_agent(cli_bin, tmp_path / "home", stub)], permissions=permissions)
    return ws


def open_asks(ws: Workspace) -> list[dict[str, Any]]:
    listed = ws.cli("asks", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def branch_file(repo: Path, branch: str, name: str) -> str | None:
    shown = subprocess.run(
        ["git", "show", f"{branch}:{name}"], cwd=repo, capture_output=True, text=True, check=False
    )
    return shown.stdout if shown.returncode == 0 else None


def test_rules_decide_what_they_can_and_the_operator_answers_the_rest(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path, repo: Path
) -> None:
    model_stub.script(
        [
            call("Write", {"file_path": "hello.txt", "content": "hello\n"}),
            call("Bash", {"command": ALLOWED, "description": "allowed"}),
            call("Bash", {"command": ASKED, "description": "asked"}),
            call("Bash", {"command": DENIED, "description": "denied"}),
            say("All done."),
        ]
    )
    ws = workspace_with(
        tmp_path, cli_bin, model_stub, allow=["Bash(python3 -c:*)"], deny=["Bash(sh:*)"]
    )
    ws.submit(job_toml("j", [{"id": "t", "input": "do the work"}], repo=str(repo), review=False))
    with running_engine(ws.engine()):
        (ask,) = wait_for(lambda: open_asks(ws), timeout=120, what="claude to ask about node")
        assert ask["task_key"] == "j/t" and ask["tool"] == "Bash"
        assert ask["tool_input"]["command"] == ASKED
        assert ask["summary"] == f"Bash {ASKED}"
        answered = ws.cli("answer", str(ask["id"]), "allow")  # a second process answers
        assert answered.returncode == 0, answered.stderr
        store = ws.store()
        wait_for(lambda: tasks(store)["j/t"].state == "SUCCEEDED", timeout=120)
    assert branch_file(repo, "relay/j", "hello.txt") == "hello\n"
    assert branch_file(repo, "relay/j", "allowed.txt") == "by a rule"
    assert branch_file(repo, "relay/j", "asked.txt") == "by the operator"
    assert branch_file(repo, "relay/j", "denied.txt") is None
    denied = model_stub.results_for("Bash")[-1]
    assert denied.is_error, "the denied command's tool result reached the model as an error"
    status = ws.status()
    (run,) = [t for t in status["tasks"] if t["key"] == "j/t"]
    assert run["last_execution"]["outcome"] == "succeeded"
    events = ws.cli("events").stdout
    assert "j/t waits on you: Bash node -e" in events
    assert "refused by the CLI itself" in events  # the sh rule went to claude's own flag


def test_an_ask_nobody_answers_is_denied_at_its_timeout_and_the_session_goes_on(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path, repo: Path
) -> None:
    model_stub.script(
        [
            call("Bash", {"command": ASKED, "description": "asked"}),
            call("Write", {"file_path": "after.txt", "content": "went on\n"}),
            say("Went on without it."),
        ]
    )
    ws = workspace_with(tmp_path, cli_bin, model_stub, ask_timeout=2)
    ws.submit(job_toml("j", [{"id": "t", "input": "do it"}], repo=str(repo), review=False))
    started = time.monotonic()
    with running_engine(ws.engine()):
        store = ws.store()
        wait_for(lambda: tasks(store)["j/t"].state == "SUCCEEDED", timeout=120)
    assert time.monotonic() - started < 100
    denied = model_stub.results_for("Bash")[-1]
    assert denied.is_error and "no answer in 2 s" in denied.output
    assert branch_file(repo, "relay/j", "after.txt") == "went on\n"
    assert branch_file(repo, "relay/j", "asked.txt") is None
    assert open_asks(ws) == []
    (expired,) = json.loads(ws.cli("asks", "--json", "--all").stdout)
    assert expired["status"] == "expired"


def test_a_question_is_answered_with_text(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path, repo: Path
) -> None:
    question = {
        "questions": [
            {
                "question": "Which database should the tests use?",
                "header": "Database",
                "options": [
                    {"label": "SQLite", "description": "a file"},
                    {"label": "PostgreSQL", "description": "a server"},
                ],
                "multiSelect": False,
            }
        ]
    }
    model_stub.script([call("AskUserQuestion", question), say("Using what you said.")])
    ws = workspace_with(tmp_path, cli_bin, model_stub)
    ws.submit(job_toml("j", [{"id": "t", "input": "set up the tests"}], repo=str(repo),
                       review=False))  # fmt: skip
    with running_engine(ws.engine()):
        (ask,) = wait_for(lambda: open_asks(ws), timeout=120, what="the question")
        assert ask["kind"] == "question"
        assert ask["summary"] == "AskUserQuestion: Which database should the tests use?"
        refused = ws.cli("answer", str(ask["id"]), "allow")
        assert refused.returncode == 1 and "answer it with --text" in refused.stderr
        assert ws.cli("answer", str(ask["id"]), "--text", "postgresql").returncode == 0
        store = ws.store()
        wait_for(lambda: tasks(store)["j/t"].state == "SUCCEEDED", timeout=120)
    answer = model_stub.results_for("AskUserQuestion")[-1].output
    assert '"Which database should the tests use?"="PostgreSQL"' in answer


def test_doctor_checks_the_permission_flags_against_the_pinned_claude(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path
) -> None:
    """--permission-prompt-tool is not in claude's --help; doctor tries it before judging."""
    ws = workspace_with(tmp_path, cli_bin, model_stub, allow=["Bash(npm test:*)"])
    doctor = ws.cli("doctor", "--json", timeout=120)
    (row,) = json.loads(doctor.stdout)["agents"]
    assert row["problems"] == [], row
    assert doctor.returncode == 0


def test_real_claude_plans_builds_checks_reviews_and_the_job_merges(
    cli_bin: Path, model_stub: ModelStub, tmp_path: Path, repo: Path
) -> None:
    """One autonomous job, every role the pinned claude on the stub: the check the
    implementer runs (allowed by a rule) writes its file, and both land on the base."""
    subprocess.run(["git", "checkout", "-q", "-b", "elsewhere"], cwd=repo, check=True)
    plan = {
        "objective_status": "in_progress",
        "assessment": "one task writes the greeting and checks it",
        "next_tasks": [{"id": "greet", "title": "Write greet.txt", "input": "write greet.txt",
                        "role": "implementer", "dependencies": [], "story_size": "S"}],
        "unblocks": [],
    }  # fmt: skip
    done = {"objective_status": "satisfied", "assessment": "greeted", "next_tasks": []}
    check = "python3 -c \"open('checked.txt', 'w').write(open('greet.txt').read().upper())\""
    approve = {"verdict": "approve", "summary": "greets as asked", "findings": []}
    model_stub.script(
        [
            say(json.dumps(plan)),
            call("Write", {"file_path": "greet.txt", "content": "hello\n"}),
            call("Bash", {"command": check, "description": "run the check"}),
            say('{"summary": "wrote greet.txt and checked it"}'),
            say(json.dumps(done)),
            say(json.dumps(approve)),
        ]
    )
    ws = Workspace(tmp_path / "ws")
    ws.path.mkdir()
    agent = claude_agent(cli_bin, tmp_path / "home", model_stub)
    agent["roles"] = ["planner", "implementer", "reviewer"]
    ws.configure(agents=[agent], permissions={"allow": ["Bash(python3 -c:*)"]},
                 git={"check_seconds": 0.2})  # fmt: skip
    job = job_toml("greet", [], repo=str(repo), mode="autonomous", objective="greet the user",
                   auto_merge=True)  # fmt: skip
    ws.submit(job)
    with running_engine(ws.engine()):
        store = ws.store()
        wait_for(lambda: _job_state(store) == "MERGED", timeout=240, what="the merge")
    assert branch_file(repo, "main", "greet.txt") == "hello\n"
    assert branch_file(repo, "main", "checked.txt") == "HELLO\n"
    assert open_asks(ws) == []
    assert model_stub.turns_left == 0


def _job_state(store: Any) -> str | None:
    from helpers import jobs

    job = jobs(store).get("greet")
    return job.state if job is not None else None
