"""Secrets in agent env never reach artifacts, events, errors or the console's rows."""

from __future__ import annotations

from pathlib import Path

from helpers import Workspace, events, executions, job_toml, run_until_idle, tasks

SECRET = "sk-relay-test-0123456789"


def test_a_secret_the_agent_prints_is_masked_everywhere_relay_records_it(
    sqlite_workspace: Workspace,
) -> None:
    script = "echo using key=$MY_API_KEY; echo failed with key=$MY_API_KEY >&2; exit 3"
    sqlite_workspace.configure(
        agents=[
            {
                "id": "leaky",
                "provider": "command",
                "roles": ["implementer"],
                "command": ["sh", "-c", script, "{prompt_file}"],
                "env": {"MY_API_KEY": SECRET},
            }
        ]
    )
    sqlite_workspace.submit(job_toml("leak", [{"id": "t", "max_attempts": 1}]))
    store = sqlite_workspace.store()

    assert run_until_idle(sqlite_workspace.engine()) is False

    task = tasks(store)["leak/t"]
    assert task.state == "FAILED"
    assert "failed with key=***" in (task.error or "")
    # (its troubleshooter, which no agent here can take, has an execution of its own)
    (execution,) = [e for e in executions(store) if e.task_key == "leak/t"]
    recorded = [execution.error or "", execution.last_output or "", " ".join(execution.argv)]
    artifacts = Path(execution.artifact_dir or "")
    for name in ("stdout.txt", "stderr.txt", "prompt-packet.json"):
        recorded.append((artifacts / name).read_text())
    recorded += [event.message for event in events(store)]
    assert all(SECRET not in text for text in recorded)
    assert "key=***" in (artifacts / "stdout.txt").read_text()
    assert '"MY_API_KEY": "***"' in (artifacts / "prompt-packet.json").read_text()
