"""Whatever bytes an agent prints, its exit is written and the engine goes on.

PostgreSQL stores no NUL in text: an agent printing one (a binary file, ``find -print0``)
made the exit write fail and ``relay run`` stop, and the task, left RUNNING, stopped the
next engine that ran it once its lease lapsed."""

from __future__ import annotations

import sys

from helpers import Workspace, events, job_toml, run_until_idle, tasks

NUL_PRINTER = (
    "import sys; sys.stdout.write('out\\0put\\n'); sys.stderr.write('bad\\0byte\\n'); sys.exit(1)"
)


def test_an_agent_printing_nul_fails_its_task_and_the_engine_goes_on(
    workspace: Workspace,
) -> None:
    agent = {"id": "nul", "provider": "command", "command": [sys.executable, "-c", NUL_PRINTER]}
    workspace.configure(agents=[agent])
    workspace.submit(job_toml("j", [{"id": "t", "max_attempts": 1}, {"id": "u"}]))
    store = workspace.store()

    assert run_until_idle(workspace.engine()) is False  # ends idle: it did not stop midway

    done = tasks(store)
    assert {key: task.state for key, task in done.items()} == {"j/t": "FAILED", "j/u": "FAILED"}
    assert (done["j/t"].error or "").replace("\0", "") == "exit 1: badbyte"
    failed = [e.message.replace("\0", "") for e in events(store, "task.failed")]
    assert any("badbyte" in message for message in failed)
