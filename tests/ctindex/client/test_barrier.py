"""One barrier, two ways to ask it (ctindex/client/barrier.py): the socket's
and the share's failures come back as the same `Unsynced` facts, their
answers as the same `Synced`, so ctindex/query/freshness.py decides them in
one table (tests/ctindex/query/test_freshness_decide.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctindex.client.barrier import ShareBarrier, SocketBarrier, Synced, Unsynced
from ctindex.client.daemon_requests import NO_DAEMON
from ctindex.ipc.build_id import build_id
from ctindex.ipc.runtime_dir import RuntimePaths
from tests.ctindex.client.test_share import DIGEST, _beat, _good, host  # noqa: F401 (fixture)


def test_a_socket_nobody_listens_on_is_unsynced_and_a_daemon_may_be_started(
    tmp_path: Path,
) -> None:
    ran: list[bool] = []
    (tmp_path / "run").mkdir()
    paths = RuntimePaths(tmp_path, tmp_path / "run")
    out = SocketBarrier(paths, DIGEST, meanwhile=lambda: ran.append(True)).sync(200)
    assert isinstance(out, Unsynced)
    assert out.reason == NO_DAEMON and out.spawnable
    assert not (out.other_build or out.other_plan) and out.serving is None
    assert ran == []  # nothing was sent, so nothing overlapped an answer


def test_a_share_without_a_host_is_unsynced_and_nobody_serves(tmp_path: Path) -> None:
    out = ShareBarrier(tmp_path, DIGEST).sync(50)
    assert isinstance(out, Unsynced) and out.serving is None and not out.spawnable


def test_a_share_hosts_answer_is_synced_under_the_plan_it_names(
    tmp_path: Path,
    host: Any,  # noqa: F811
) -> None:
    _beat(tmp_path)
    host(lambda req: {**_good(req), "build": build_id(), "plan": req["plan"] or DIGEST})
    out = ShareBarrier(tmp_path, None).sync(2000)  # under whatever plan the host runs
    assert isinstance(out, Synced), out
    assert (out.plan, out.host, out.result.generation) == (DIGEST, "server1", 7)


def test_a_share_host_of_another_build_serves_but_is_not_taken_at_its_word(
    tmp_path: Path,
    host: Any,  # noqa: F811
) -> None:
    _beat(tmp_path)
    host(lambda req: {**_good(req), "build": "another", "plan": req["plan"] or "its own"})
    other_build = ShareBarrier(tmp_path, None).sync(2000)
    assert isinstance(other_build, Unsynced), other_build
    assert other_build.other_plan and other_build.serving == "server1"


def test_a_share_host_under_another_plan_serves_but_is_not_taken_at_its_word(
    tmp_path: Path,
    host: Any,  # noqa: F811
) -> None:
    _beat(tmp_path)
    host(lambda req: {**_good(req), "plan": "its own"})  # asked under a plan, it names its own
    other_plan = ShareBarrier(tmp_path, DIGEST).sync(2000)
    assert isinstance(other_plan, Unsynced), other_plan
    assert other_plan.other_plan and other_plan.serving == "server1"


@pytest.mark.parametrize("digest", [DIGEST, None])
def test_a_share_host_that_stays_silent_is_unsynced_but_still_serves(
    tmp_path: Path,
    host: Any,  # noqa: F811
    digest: str | None,
) -> None:
    _beat(tmp_path)
    host(lambda req: None)
    out = ShareBarrier(tmp_path, digest).sync(30)
    assert isinstance(out, Unsynced) and out.serving == "server1" and not out.other_plan
