"""The CLI words a Claude limit as the console does: when it resets, not an epoch."""

from __future__ import annotations

import time

from helpers import Workspace

from relay_engine.contracts.config import KNOWN_ROLES
from relay_engine.core.states import JobState, TaskState
from relay_engine.store.events import EventKind
from relay_engine.store.schema import Event, Job, ProviderLimit, Task


def test_status_agents_and_events_say_when_a_claude_limit_resets(
    sqlite_workspace: Workspace,
) -> None:
    ws = sqlite_workspace
    ws.configure(agents=[{"id": "claude-a", "provider": "claude", "roles": list(KNOWN_ROLES)}])
    now = time.time()
    said = f"Claude AI usage limit reached|{int(now) + 3600}"
    with ws.store().write() as session:
        session.add(Job(id="j", title="j", state=JobState.ACTIVE))
        session.add(Task(key="j/t", job_id="j", task_id="t", state=TaskState.FAILED, error=said))
        session.add(ProviderLimit(provider="claude", status="limited", reset_at=now + 3600,
                                  source_text=said))  # fmt: skip
        session.add(Event(at=now, job_id="j", kind=EventKind.TASK_FAILED, message=said))
    for command in ("status", "agents", "events"):
        done = ws.cli(command)
        assert done.returncode == 0, done.stderr
        flat = " ".join(done.stdout.split())
        assert "Claude AI usage limit reached; resets " in flat, (command, flat)
        assert f"|{int(now) + 3600}" not in flat, (command, flat)
