"""A wake waits for an agent about to end, so its exit shares the tick (one queue read,
one claim, one exit write for both), but never for agents that work for minutes."""

from __future__ import annotations

import pytest

from relay_engine.core.landing import gather_for

LEAST, MOST = 0.005, 0.02


def test_an_agent_due_within_the_window_is_waited_for_until_due_and_a_little_more() -> None:
    # Agents live 8 ms; one started 5 ms ago ends in about 3 ms (+2 ms for how they vary).
    assert gather_for([0.005], [0.008] * 5, least=LEAST, most=MOST) == pytest.approx(0.005)
    assert gather_for([0.001], [0.008] * 5, least=LEAST, most=MOST) == pytest.approx(0.009)


def test_the_soonest_of_the_running_agents_sets_the_wait() -> None:
    lived = [0.010, 0.012, 0.011]
    assert gather_for([0.0, 0.006], lived, least=LEAST, most=MOST) == pytest.approx(
        0.005 + 0.011 / 4
    )


def test_agents_that_work_for_minutes_are_never_waited_for() -> None:
    lived = [95.0, 300.0, 41.0]
    assert gather_for([60.0, 2.0], lived, least=LEAST, most=MOST) == LEAST
    # Even one past the typical lifetime: a quarter of it is far beyond the window.
    assert gather_for([400.0], lived, least=LEAST, most=MOST) == LEAST


def test_without_history_or_running_agents_the_wait_is_the_least() -> None:
    assert gather_for([0.001], [], least=LEAST, most=MOST) == LEAST
    assert gather_for([], [0.008], least=LEAST, most=MOST) == LEAST


def test_an_overdue_agent_is_due_now_and_the_wait_never_drops_below_the_least() -> None:
    assert gather_for([0.030], [0.004] * 3, least=LEAST, most=MOST) == LEAST
    assert gather_for([0.030], [0.016] * 3, least=LEAST, most=MOST) == LEAST  # 4 ms < 5
