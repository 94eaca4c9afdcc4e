"""Agent availability (pure): selection skips agents that cannot work, probes back off,
and limits can never make relay relaunch in a hot loop."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from relay_engine.core.availability import (
    PROBE_MAX_S,
    Availability,
    after_failure,
    is_available,
    probe_delay,
)
from relay_engine.core.failures import AgentFailure, FailureClass
from relay_engine.core.limits import MIN_WAIT_S, backoff_reset, detect_limit, effective_reset
from relay_engine.core.selection import AgentFacts, Park, Selected, select_agent

NOW = 1_800_000_000.0
AUTH = AgentFailure(FailureClass.AUTH, "Not logged in · Please run /login", "run claude")
OFFLINE = AgentFailure(FailureClass.UNREACHABLE, "Reconnecting... waiting for network", "net")


def agent(agent_id: str, provider: str) -> AgentFacts:
    return AgentFacts(agent_id, provider, frozenset({"implementer"}), None, True, None, 0)


def pick(states: dict[str, Availability], now: float = NOW):  # type: ignore[no-untyped-def]
    return select_agent(
        role="implementer",
        model_class=None,
        pinned_agent=None,
        pin=None,
        agents=[agent("claude-main", "claude"), agent("codex-main", "codex")],
        providers={},
        now=now,
        availability=states,
    )


def state(agent_id: str, failure: AgentFailure, now: float = NOW) -> Availability:
    marked = after_failure(None, failure, now)
    return Availability(agent_id, marked.status, marked.reason, marked.fix, marked.until, 1)


def test_an_agent_that_is_not_logged_in_is_skipped_for_the_next_capable_one() -> None:
    assert pick({"claude-main": state("claude-main", AUTH)}) == Selected(
        "codex-main", "codex", "auto"
    )


def test_no_capable_agent_left_parks_waiting_on_the_agent_with_its_reason() -> None:
    choice = pick(
        {"claude-main": state("claude-main", AUTH), "codex-main": state("codex-main", AUTH)}
    )
    assert isinstance(choice, Park)
    assert choice.until is None  # held until an operator or a config change clears it
    assert choice.reason == "waiting on agent claude-main: Not logged in · Please run /login"


def test_an_unreachable_agent_parks_until_its_probe_and_is_tried_once_it_is_due() -> None:
    states = {
        "claude-main": state("claude-main", AUTH),
        "codex-main": state("codex-main", OFFLINE),
    }
    choice = pick(states)
    assert isinstance(choice, Park) and choice.agent == "codex-main"
    assert choice.until == NOW + 30
    assert pick(states, now=NOW + 30) == Selected("codex-main", "codex", "auto")


def test_probe_back_off_doubles_from_30_seconds_to_10_minutes() -> None:
    assert [probe_delay(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]
    first = after_failure(None, OFFLINE, NOW)
    assert first.until == NOW + 30
    # another launch that was in flight fails too: the back-off does not double for it
    same_round = after_failure(first, OFFLINE, NOW + 1)
    assert (same_round.failures, same_round.until) == (1, NOW + 30)
    probe_failed = after_failure(first, OFFLINE, NOW + 31)
    assert (probe_failed.failures, probe_failed.until) == (2, NOW + 31 + 60)


def test_held_failures_do_not_expire_with_time() -> None:
    held = state("claude-main", AUTH)
    assert not is_available(held, NOW + 10 * 365 * 86400)
    assert held.until is None


@settings(max_examples=300)
@given(
    delay=st.one_of(st.none(), st.floats(min_value=-1e9, max_value=1e9)),
    now=st.floats(min_value=0, max_value=4e9),
    hits=st.integers(min_value=0, max_value=50),
)
def test_no_reset_ever_makes_relay_relaunch_sooner_than_the_minimum_wait(
    delay: float | None, now: float, hits: int
) -> None:
    reset = None if delay is None else now + delay
    effective = effective_reset(reset, now, hits)
    assert effective >= now + MIN_WAIT_S
    if reset is None or reset <= now:
        assert effective == backoff_reset(now, hits)  # a reset already past says nothing
    elif reset >= now + MIN_WAIT_S:
        assert effective == reset


def test_a_past_epoch_reset_gets_the_back_off() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    signal = detect_limit("Claude AI usage limit reached|1700000000", "claude", now)
    assert signal is not None and signal.reset_at == 1700000000.0
    assert effective_reset(signal.reset_at, now.timestamp(), 1) == now.timestamp() + 300


def test_date_only_and_bare_retry_resets_parse() -> None:
    now = datetime(2026, 8, 10, 15, 0, tzinfo=UTC)
    dated = detect_limit("You've hit your usage limit. Try again Aug 18.", "codex", now)
    assert dated is not None
    assert dated.reset_at == datetime(2026, 8, 18, tzinfo=UTC).timestamp()
    next_year = detect_limit("You've hit your usage limit. Try again Jan 2.", "codex", now)
    assert next_year is not None
    assert next_year.reset_at == datetime(2027, 1, 2, tzinfo=UTC).timestamp()
    bare = detect_limit("Please retry in 41.5s.", "gemini", now)
    assert bare is not None and bare.reset_at == now.timestamp() + 41.5
    assert detect_limit("I will retry in 5 seconds if the test fails", "gemini", now) is None


def test_probe_delay_never_exceeds_ten_minutes() -> None:
    assert max(probe_delay(n) for n in range(100)) == PROBE_MAX_S
