"""The barrier (ctindex/daemon/barrier.py): the client's budget, and cookies."""

from __future__ import annotations

import socket
from pathlib import Path

from ctindex.daemon.barrier import BARRIER_SHARE, Cookies, budget_s, is_search
from ctindex.daemon.server import Connection


def test_budget_is_the_clients_clamped_else_the_plans() -> None:
    assert budget_s(500, 900) == 0.5
    assert budget_s(None, 900) == 0.9
    assert budget_s(True, 900) == 0.9  # a JSON true is no number of milliseconds
    assert budget_s("500", 900) == 0.9
    assert budget_s(1, 900) == 0.01
    assert budget_s(60_000, 900) == 10.0


def test_cookie_round_trip(tmp_path: Path) -> None:
    folder = tmp_path / "cookies"
    folder.mkdir()
    a, b = socket.socketpair()
    try:
        conn = Connection(a, deadline=0.0, request={"op": "barrier"})
        cookies = Cookies(folder, tmp_path, "inst")
        waiter = cookies.create(conn, 10.0, 1.0, before_retry=lambda: None)
        assert waiter.deadline == 10.0 + BARRIER_SHARE
        (name,) = (p.name for p in folder.iterdir())
        assert name.startswith("inst-") and cookies
        assert cookies.ready() == []
        cookies.seen([name])
        assert cookies.ready() == [waiter] and not cookies
        assert not any(folder.iterdir())  # the cookie file is gone
        assert not is_search(conn)
    finally:
        a.close()
        b.close()


def test_cookie_not_seen_expires(tmp_path: Path) -> None:
    folder = tmp_path / "cookies"
    folder.mkdir()
    a, b = socket.socketpair()
    try:
        cookies = Cookies(folder, tmp_path, "inst")
        waiter = cookies.create(Connection(a, 0.0), 10.0, 1.0, before_retry=lambda: None)
        assert cookies.expired(waiter.deadline - 0.001) == []
        assert cookies.expired(waiter.deadline) == [waiter]
        assert not cookies and not any(folder.iterdir())
    finally:
        a.close()
        b.close()
