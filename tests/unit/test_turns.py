"""Engines take turns at the fleet's housekeeping: every tick slot has one engine, whatever
the fleet's size, so what the fleet reads per second does not grow with it."""

from __future__ import annotations

from relay_engine.core.turns import Place, takes_turn


def test_a_lone_engine_takes_every_turn() -> None:
    assert all(takes_turn(Place(), now, 0.5) for now in (0.0, 0.49, 0.5, 7.3, 1e9))


def test_every_slot_has_exactly_one_engine_of_the_fleet() -> None:
    ids = ["run-c", "run-a", "run-d", "run-b"]
    places = [Place.among(engine, ids) for engine in ids]
    assert sorted(p.rank for p in places) == [0, 1, 2, 3] and {p.size for p in places} == {4}
    for slot in range(40):
        now = slot * 0.5 + 0.2
        assert sum(takes_turn(p, now, 0.5) for p in places) == 1


def test_an_engine_not_yet_in_the_list_counts_itself() -> None:
    assert Place.among("run-new", ["run-a"]) == Place(rank=1, size=2)
