"""Close matches for a mistyped name (ctindex/base/suggest.py)."""

from __future__ import annotations

import difflib

from hypothesis import given
from hypothesis import strategies as st

from ctindex.base.suggest import CUTOFF, MOST, close_matches, did_you_mean

COMMANDS = ("search", "show", "status", "update", "rebuild", "verify", "scopes", "watch")


def test_a_typo_finds_its_command_first() -> None:
    assert close_matches("serach", COMMANDS)[0] == "search"
    assert close_matches("rebuidl", COMMANDS) == ["rebuild"]


def test_ranked_best_first_and_at_most_three() -> None:
    known = ["stat", "state", "status", "statue", "stats", "station"]
    got = close_matches("statu", known)
    assert len(got) == MOST
    ratios = [difflib.SequenceMatcher(None, name, "statu").ratio() for name in got]
    assert ratios == sorted(ratios, reverse=True)
    # the closest possible ones are among them
    assert "status" in got and "statue" in got


def test_nothing_close_is_no_suggestion() -> None:
    assert close_matches("zzzzzz", COMMANDS) == []
    assert close_matches("anything", []) == []


def test_case_counts_as_a_difference() -> None:
    """The rule is difflib's ratio over the exact characters: a name typed
    in capitals is close only when enough of it still agrees."""
    assert close_matches("Search", COMMANDS) == ["search"]  # 5 of 6 agree
    assert close_matches("SEARCH", COMMANDS) == []  # nothing agrees


def test_known_may_be_any_iterable_even_a_one_shot_generator() -> None:
    assert close_matches("shwo", (name for name in COMMANDS)) == ["show"]


def test_cutoff_and_count_are_honoured() -> None:
    assert close_matches("srch", COMMANDS, cutoff=0.99) == []
    assert len(close_matches("s", ["s1", "s2", "s3", "s4"], n=2, cutoff=0.1)) == 2


@given(
    st.text(alphabet="abcde", max_size=8),
    st.lists(st.text(alphabet="abcde", max_size=8), max_size=12),
)
def test_suggestions_come_from_known_and_pass_the_cutoff(word: str, known: list[str]) -> None:
    got = close_matches(word, known)
    assert len(got) <= MOST
    for name in got:
        assert name in known
        assert difflib.SequenceMatcher(None, name, word).ratio() >= CUTOFF  # difflib's order
    if word in known:
        assert got[0] == word  # an exact name is its own best match


def test_did_you_mean_text() -> None:
    assert did_you_mean([]) == ""
    assert did_you_mean(()) == ""
    assert did_you_mean(["search"]) == "; did you mean search?"
    assert did_you_mean(["a", "b"]) == "; did you mean a, b?"
    assert did_you_mean(["a b", "c"], quote=True) == "; did you mean 'a b', 'c'?"
    assert did_you_mean(iter(["x"])) == "; did you mean x?"
