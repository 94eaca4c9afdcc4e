"""A queued task pinned to an agent waits, saying where that agent is defined, while no
live engine defines it."""

from __future__ import annotations

import pytest

from relay_engine.core.waits import AgentHome, pinned_wait

B = AgentHome("run-b", "host-b", live=False)
C = AgentHome("run-c", "host-c", live=False)


@pytest.mark.parametrize(
    ("homes", "workstream", "what", "release"),
    [
        ([B], None, "agent x (defined on engine run-b on host-b, not running)", "relay pin j/t"),
        (
            [B, C, B],
            "ui",
            "(defined on engine run-b on host-b, engine run-c on host-c and 1 more, not running)",
            "relay pin j ui",
        ),
        ([], None, "agent x (defined on no engine)", "relay pin j/t ANOTHER_AGENT"),
    ],
)
def test_a_pin_nobody_running_defines_is_a_wait_naming_the_engines(
    homes: list[AgentHome], workstream: str | None, what: str, release: str
) -> None:
    wait = pinned_wait("j/t", "x", homes, workstream=workstream)
    assert wait is not None
    assert wait.subject == "task j/t" and wait.until is None
    assert what in wait.what
    assert release in wait.release


def test_no_wait_while_a_live_engine_defines_the_agent() -> None:
    live = AgentHome("run-d", "host-d", live=True)
    assert pinned_wait("j/t", "x", [B, live]) is None
