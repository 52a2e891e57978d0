"""Colour decisions (ctindex/base/tty.py): --color, NO_COLOR, TERM=dumb, a terminal."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest

from ctindex.base.tty import choice_in, colour_wanted, decided


@pytest.fixture
def terminal() -> Iterator[io.TextIOWrapper]:
    leader, follower = os.openpty()
    stream = open(follower, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


@pytest.mark.parametrize(
    ("choice", "env", "on_terminal", "piped"),
    [
        (None, {}, True, False),
        ("auto", {}, True, False),
        ("auto", {"NO_COLOR": "1"}, False, False),
        ("auto", {"NO_COLOR": ""}, True, False),  # set but empty: no-color.org says ignore it
        ("auto", {"TERM": "dumb"}, False, False),
        ("always", {"NO_COLOR": "1"}, True, True),  # an explicit choice wins
        ("never", {}, False, False),
    ],
)
def test_colour_wanted(
    terminal: io.TextIOWrapper,
    choice: str | None,
    env: dict[str, str],
    on_terminal: bool,
    piped: bool,
) -> None:
    assert colour_wanted(choice, terminal, env) is on_terminal
    assert colour_wanted(choice, io.StringIO(), env) is piped


def test_the_decision_goes_last_among_the_options(
    terminal: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert (
        choice_in(["--color", "never", "search", "--color=always", "--", "--color=x"]) == "always"
    )
    assert decided(["search", "x"], terminal) == ["search", "x", "--color=always"]
    assert decided(["search", "--", "-x"], io.StringIO()) == ["search", "--color=never", "--", "-x"]
    assert decided(["--color=never", "search", "x"], terminal)[-1] == "--color=never"
    monkeypatch.setenv("NO_COLOR", "yes")
    assert decided(["search", "x"], terminal)[-1] == "--color=never"
