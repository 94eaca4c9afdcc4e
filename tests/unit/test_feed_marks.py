"""How a reader's place in the change feed moves: ids that did not come when the reader
passed them are asked for again until they show or their wait runs out."""

from __future__ import annotations

from relay_engine.store.feed import GAP_WAIT_S, MAX_GAPS, START, FeedMark, passed


def test_ids_skipped_on_the_way_up_are_kept_as_gaps() -> None:
    mark = passed(FeedMark(top=10), [11, 14], now=100.0)
    assert mark == FeedMark(top=14, gaps=((12, 100.0), (13, 100.0)))


def test_a_gap_that_shows_is_closed_and_the_others_keep_their_age() -> None:
    mark = passed(FeedMark(top=14, gaps=((12, 100.0), (13, 100.0))), [13, 15], now=101.0)
    assert mark == FeedMark(top=15, gaps=((12, 100.0),))


def test_a_gap_older_than_the_wait_is_given_up() -> None:
    mark = FeedMark(top=14, gaps=((12, 100.0),))
    assert passed(mark, [], now=100.0 + GAP_WAIT_S) == FeedMark(top=14)
    assert mark.waiting(now=100.0 + GAP_WAIT_S - 1) == {12: 100.0}


def test_a_reader_from_the_start_waits_for_ids_below_the_first_it_sees() -> None:
    assert passed(START, [2, 3], now=5.0) == FeedMark(top=3, gaps=((1, 5.0),))


def test_a_long_jump_keeps_only_the_newest_gaps() -> None:
    mark = passed(FeedMark(top=0), [5 * MAX_GAPS], now=1.0)
    assert len(mark.gaps) == MAX_GAPS - 1
    assert mark.gaps[0][0] == 4 * MAX_GAPS + 1
