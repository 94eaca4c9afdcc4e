from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay_engine.core.selection import (
    AgentFacts,
    NoAgent,
    Park,
    PinFacts,
    ProviderFacts,
    Selected,
    Wait,
    eligible_agents,
    select_agent,
)

NOW = 1_000_000.0


def agent(
    agent_id: str,
    provider: str = "anthropic",
    *,
    roles: tuple[str, ...] = ("coder",),
    model_class: str | None = None,
    enabled: bool = True,
    max_concurrent: int | None = None,
    running: int = 0,
) -> AgentFacts:
    return AgentFacts(
        agent_id, provider, frozenset(roles), model_class, enabled, max_concurrent, running
    )


def limited(**until: float | None) -> dict[str, ProviderFacts]:
    return {p: ProviderFacts(p, u) for p, u in until.items()}


def pick(
    agents: list[AgentFacts],
    *,
    role: str = "coder",
    model_class: str | None = None,
    pinned_agent: str | None = None,
    pin: str | None = None,
    providers: dict[str, ProviderFacts] | None = None,
    exclude: frozenset[str] = frozenset(),
):
    return select_agent(
        role=role,
        model_class=model_class,
        pinned_agent=pinned_agent,
        pin=PinFacts(pin) if pin else None,
        agents=agents,
        providers=providers or {},
        now=NOW,
        exclude_providers=exclude,
    )


@pytest.mark.parametrize(
    ("agents", "role", "model_class", "expected"),
    [
        # Eligibility: enabled, role, model class (None on either side matches).
        ([agent("a", enabled=False), agent("b")], "coder", None, "b"),
        ([agent("a", roles=("reviewer",)), agent("b")], "coder", None, "b"),
        ([agent("a", model_class="fast"), agent("b", model_class="smart")], "coder", "smart", "b"),
        ([agent("a", model_class=None)], "coder", "smart", "a"),
        ([agent("a", model_class="fast")], "coder", None, "a"),
        # Fewest running wins; ties go to config order.
        ([agent("a", running=2), agent("b", running=1)], "coder", None, "b"),
        ([agent("a", running=1), agent("b", running=1)], "coder", None, "a"),
        ([agent("b"), agent("a")], "coder", None, "b"),
        # A full agent is passed over for one with room.
        ([agent("a", max_concurrent=1, running=1), agent("b", running=5)], "coder", None, "b"),
    ],
)
def test_auto_selection(agents, role, model_class, expected):
    result = pick(agents, role=role, model_class=model_class)
    assert result == Selected(expected, "anthropic", "auto")


def test_no_agent_names_role_and_model_class():
    result = pick([agent("a", roles=("reviewer",))], model_class="smart")
    assert isinstance(result, NoAgent)
    assert "coder" in result.reason and "smart" in result.reason


def test_no_agent_when_only_disabled_agents_have_the_role():
    result = pick([agent("a", enabled=False)])
    assert isinstance(result, NoAgent)
    assert "coder" in result.reason


def test_wait_when_all_usable_agents_are_full():
    result = pick(
        [agent("a", max_concurrent=1, running=1), agent("b", max_concurrent=2, running=2)]
    )
    assert isinstance(result, Wait)


def test_limited_provider_is_skipped():
    agents = [agent("a", "anthropic"), agent("b", "openai", running=3)]
    result = pick(agents, providers=limited(anthropic=NOW + 60))
    assert result == Selected("b", "openai", "auto")


def test_limit_in_the_past_or_none_is_usable():
    agents = [agent("a", "anthropic"), agent("b", "openai")]
    assert pick(agents, providers=limited(anthropic=NOW - 1)) == Selected("a", "anthropic", "auto")
    assert pick(agents, providers=limited(anthropic=NOW)) == Selected("a", "anthropic", "auto")
    assert pick(agents, providers=limited(anthropic=None)) == Selected("a", "anthropic", "auto")


def test_park_until_earliest_reset_when_every_provider_is_limited():
    agents = [agent("a", "anthropic"), agent("b", "openai"), agent("c", "google")]
    providers = limited(anthropic=NOW + 300, openai=NOW + 60, google=NOW + 900)
    result = pick(agents, providers=providers)
    assert isinstance(result, Park)
    assert (result.provider, result.until) == ("openai", NOW + 60)
    assert "openai" in result.reason


def test_park_ignores_ineligible_agents_providers():
    agents = [agent("a", "anthropic"), agent("x", "openai", roles=("reviewer",))]
    result = pick(agents, providers=limited(anthropic=NOW + 300, openai=NOW + 10))
    assert result == Park("anthropic", NOW + 300, result.reason)


def test_limited_wins_over_full_agents_elsewhere():
    # A usable-but-full agent means wait (it frees up soon), not park.
    agents = [agent("a", "anthropic"), agent("b", "openai", max_concurrent=1, running=1)]
    assert isinstance(pick(agents, providers=limited(anthropic=NOW + 300)), Wait)


def test_exclude_providers_swaps_away():
    agents = [agent("a", "anthropic"), agent("b", "openai", running=4)]
    assert pick(agents, exclude=frozenset({"anthropic"})) == Selected("b", "openai", "auto")


def test_all_excluded_without_known_limit_waits():
    result = pick([agent("a", "anthropic")], exclude=frozenset({"anthropic"}))
    assert isinstance(result, Wait)


def test_excluded_and_limited_parks():
    result = pick(
        [agent("a", "anthropic")],
        providers=limited(anthropic=NOW + 30),
        exclude=frozenset({"anthropic"}),
    )
    assert result == Park("anthropic", NOW + 30, result.reason)


def test_task_pin_wins_over_pin_and_auto():
    agents = [agent("a"), agent("b", running=3), agent("c", running=5)]
    assert pick(agents, pinned_agent="c", pin="b") == Selected("c", "anthropic", "task-pin")


def test_pin_wins_over_auto():
    agents = [agent("a"), agent("b", running=3)]
    assert pick(agents, pin="b") == Selected("b", "anthropic", "pin")


@pytest.mark.parametrize("via", ["task-pin", "pin"])
def test_pin_to_limited_provider_falls_through(via):
    agents = [agent("a", "anthropic"), agent("b", "openai", running=9)]
    kwargs = {"pinned_agent": "a"} if via == "task-pin" else {"pin": "a"}
    result = pick(agents, providers=limited(anthropic=NOW + 60), **kwargs)
    assert result == Selected("b", "openai", "auto")


@pytest.mark.parametrize("via", ["task-pin", "pin"])
def test_pin_to_excluded_provider_falls_through(via):
    agents = [agent("a", "anthropic"), agent("b", "openai", running=9)]
    kwargs = {"pinned_agent": "a"} if via == "task-pin" else {"pin": "a"}
    assert pick(agents, exclude=frozenset({"anthropic"}), **kwargs).agent_id == "b"


@pytest.mark.parametrize(
    "pinned",
    [
        agent("p", enabled=False),
        agent("p", roles=("reviewer",)),
        agent("p", model_class="fast"),
    ],
)
@pytest.mark.parametrize("via", ["task-pin", "pin"])
def test_pin_to_ineligible_agent_falls_through(pinned, via):
    agents = [pinned, agent("b", running=9)]
    kwargs = {"pinned_agent": "p"} if via == "task-pin" else {"pin": "p"}
    assert pick(agents, model_class="smart", **kwargs) == Selected("b", "anthropic", "auto")


@pytest.mark.parametrize("via", ["task-pin", "pin"])
def test_a_pin_to_an_agent_this_engine_does_not_define_is_left_to_one_that_does(via):
    kwargs = {"pinned_agent": "ghost"} if via == "task-pin" else {"pin": "ghost"}
    result = pick([agent("a")], **kwargs)
    assert isinstance(result, Wait)  # neither run by another agent nor failed
    assert f"{via} agent ghost is not defined on this engine" in result.reason


def test_a_task_pin_defined_here_wins_over_a_workstream_pin_elsewhere():
    assert pick([agent("a")], pinned_agent="a", pin="ghost") == Selected(
        "a", "anthropic", "task-pin"
    )


@pytest.mark.parametrize("via", ["task-pin", "pin"])
def test_full_pinned_agent_waits_instead_of_moving(via):
    agents = [agent("a", max_concurrent=1, running=1), agent("b")]
    kwargs = {"pinned_agent": "a"} if via == "task-pin" else {"pin": "a"}
    result = pick(agents, **kwargs)
    assert isinstance(result, Wait)
    assert "a" in result.reason


def test_eligible_agents_keeps_config_order():
    agents = [agent("c"), agent("x", enabled=False), agent("a"), agent("b", roles=("r",))]
    assert [a.id for a in eligible_agents(agents, "coder", None)] == ["c", "a"]


agent_strategy = st.builds(
    agent,
    st.sampled_from(["a", "b", "c", "d", "e"]),
    st.sampled_from(["p1", "p2", "p3"]),
    roles=st.sets(st.sampled_from(["coder", "reviewer"]), max_size=2).map(tuple),
    model_class=st.sampled_from([None, "fast", "smart"]),
    enabled=st.booleans(),
    max_concurrent=st.sampled_from([None, 1, 2]),
    running=st.integers(0, 3),
)


@settings(max_examples=200, deadline=None)
@given(
    agents=st.lists(agent_strategy, max_size=6, unique_by=lambda a: a.id),
    model_class=st.sampled_from([None, "fast", "smart"]),
    limits=st.dictionaries(
        st.sampled_from(["p1", "p2", "p3"]), st.sampled_from([None, NOW - 5, NOW + 5, NOW + 50])
    ),
    pinned=st.sampled_from([None, "a", "b"]),
    pin=st.sampled_from([None, "a", "c"]),
)
def test_selection_outcome_matches_the_fleet(agents, model_class, limits, pinned, pin):
    providers = limited(**limits)
    result = pick(
        agents, model_class=model_class, pinned_agent=pinned, pin=pin, providers=providers
    )
    eligible = eligible_agents(agents, "coder", model_class)
    by_id = {a.id: a for a in agents}

    def usable(a: AgentFacts) -> bool:
        u = limits.get(a.provider)
        return u is None or u <= NOW

    wanted = pinned or pin
    if wanted is not None and wanted not in by_id:  # left to an engine that defines it
        assert isinstance(result, Wait) and wanted in result.reason
    elif not eligible:
        assert isinstance(result, NoAgent)
    elif isinstance(result, Selected):
        chosen = by_id[result.agent_id]
        assert chosen in eligible and usable(chosen)
        assert chosen.max_concurrent is None or chosen.running < chosen.max_concurrent
        assert chosen.provider == result.provider
        if result.via == "auto":
            free = [a for a in eligible if usable(a)]
            free = [a for a in free if a.max_concurrent is None or a.running < a.max_concurrent]
            assert chosen == min(free, key=lambda a: a.running)
    elif isinstance(result, Park):
        assert not any(usable(a) for a in eligible)
        assert result.until == min(limits[a.provider] for a in eligible)
        assert result.until > NOW
    else:
        assert isinstance(result, Wait)
        assert any(usable(a) for a in eligible)
