"""The client's side of the barrier through a share: heartbeat, request,
bounded poll, answer (ctindex/client/share.py). The host here is a thread
that renames an answer over the request, as the daemon does."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctindex.client import share as sc
from ctindex.ipc import share_channel as ch

DIGEST = "d" * 64


def _beat(index_dir: Path, wall: float | None = None, host: str = "server1") -> None:
    folder = ch.folder(index_dir)
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "host": host,
        "pid": 1,
        "instance": "i",
        "wall": time.time() if wall is None else wall,
    }
    (folder / ch.HEARTBEAT).write_bytes(ch.pad(record))


Answerer = Callable[[dict[str, Any]], dict[str, Any] | None]


def _good(req: dict[str, Any]) -> dict[str, Any]:
    return {
        "ok": True,
        "token": req["token"],
        "generation": 7,
        "instance": "abc",
        "lane": "clean",
        "backend": "inotify",
        "backend_reason": None,
        "degraded": None,
        "plan": req["plan"],
        "reconciled": False,
        "reconcile_reason": None,
        "reconcile_ms": None,
        "barrier_ms": 1.5,
        "identity": "id-7",
        "outside": None,
        "host": "server1",
    }


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Callable[[Answerer], list[str]]]:
    """Start a host thread answering every request with `answer(request)`
    (None: no answer); returns the names it saw."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(answer: Answerer) -> list[str]:
        seen: list[str] = []
        folder = ch.folder(tmp_path)

        def run() -> None:
            while not stop.is_set():
                for name in os.listdir(folder):
                    if not name.endswith(ch.REQUEST) or name in seen:
                        continue
                    seen.append(name)
                    doc = ch.parse((folder / name).read_bytes())
                    assert doc is not None and "ok" not in doc
                    reply = answer(doc)
                    if reply is not None:
                        tmp = folder / (name + ".ans-test")
                        tmp.write_bytes(ch.pad(reply))
                        os.replace(tmp, folder / name)
                time.sleep(0.001)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return seen

    yield start
    stop.set()
    for t in threads:
        t.join(5)


def test_no_heartbeat_no_request(tmp_path: Path) -> None:
    out = sc.ask(tmp_path, DIGEST, 50)
    assert isinstance(out, sc.NotAnswered) and out.reason.startswith(ch.NO_HOST)
    assert out.serving is None  # no host serves: the caller may write the index
    assert not ch.folder(tmp_path).exists()  # nothing written


def test_stale_heartbeat_no_request(tmp_path: Path) -> None:
    _beat(tmp_path, wall=time.time() - ch.STALE_S - 5)
    out = sc.ask(tmp_path, DIGEST, 50)
    assert isinstance(out, sc.NotAnswered) and out.reason.startswith(ch.STALE), out
    assert "server1" in out.reason and out.serving is None
    assert os.listdir(ch.folder(tmp_path)) == [ch.HEARTBEAT]


def test_a_clock_that_differs_is_named_and_does_not_stop_a_beating_host(tmp_path: Path) -> None:
    """This host's clock an hour ahead: the heartbeat looks an hour old by
    it, but the share stamps a new file with its own clock, so the host is
    seen beating on time; the difference is named, not blamed on the host."""
    _beat(tmp_path)
    doc, why = ch.heartbeat(tmp_path, time.time() + 3600)
    assert why is None and doc is not None
    assert doc[ch.CLOCK] == "this host's clock is 3600 s ahead of the share's"
    doc, why = ch.heartbeat(tmp_path, time.time() - 3600)
    assert doc is not None and doc[ch.CLOCK].endswith("3600 s behind the share's")
    assert not [n for n in os.listdir(ch.folder(tmp_path)) if n != ch.HEARTBEAT]  # no probe left
    # Stale by the share's clock too: said so, with the clock named.
    _beat(tmp_path, wall=time.time() - 60)
    doc, why = ch.heartbeat(tmp_path, time.time() + 3600)
    assert doc is None and why is not None and why.startswith(ch.STALE)
    assert "last beat 60 s ago by the share's clock; this host's clock is 3600 s ahead" in why
    # Clocks that agree: no note, and no probe at all for a fresh beat.
    _beat(tmp_path)
    doc, why = ch.heartbeat(tmp_path, time.time())
    assert doc is not None and ch.CLOCK not in doc


def test_garbage_heartbeat_is_no_host(tmp_path: Path) -> None:
    ch.folder(tmp_path).mkdir(parents=True)
    (ch.folder(tmp_path) / ch.HEARTBEAT).write_bytes(b"\x00not json")
    out = sc.ask(tmp_path, DIGEST, 50)
    assert isinstance(out, sc.NotAnswered) and out.reason.startswith(ch.NO_HOST)


def test_answered_request_becomes_a_barrier_result(tmp_path: Path, host: Any) -> None:
    _beat(tmp_path)
    seen = host(_good)
    out = sc.ask(tmp_path, DIGEST, 2000)
    assert isinstance(out, sc.Answered), out
    assert out.host == "server1"
    r = out.result
    assert (r.generation, r.identity, r.backend, r.instance) == (7, "id-7", "inotify", "abc")
    assert r.barrier_ms > 0
    # One request, named <host>-<pid>-<random>.req, removed after reading.
    assert len(seen) == 1 and seen[0].split("-")[-2] == str(os.getpid())
    assert os.listdir(ch.folder(tmp_path)) == [ch.HEARTBEAT]


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda a: {**a, "token": "someone else's"}, sc.NO_ANSWER),
        (lambda a: {**a, "plan": "other"}, "share host has a different plan"),
        (lambda a: {**a, "identity": ""}, "share host: answer names no manifest identity"),
        (
            lambda a: {"ok": False, "error": "cookie not seen in time", "token": a["token"]},
            "share host: cookie not seen in time",
        ),
        (lambda a: {**a, "generation": "seven"}, "share host: malformed answer"),
        (lambda a: None, sc.NO_ANSWER),
    ],
    ids=["wrong-token", "other-plan", "no-identity", "error", "malformed", "silent"],
)
def test_a_wrong_or_missing_answer_is_never_taken(
    tmp_path: Path,
    host: Any,
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
    expect: str,
) -> None:
    _beat(tmp_path)
    host(lambda req: change(_good(req)))
    out = sc.ask(tmp_path, DIGEST, 100)
    assert isinstance(out, sc.NotAnswered), out
    assert out.reason.startswith(expect), out
    # The heartbeat was fresh: the host serves, whatever its answer was, so
    # the caller must not write the index (ctindex.ShareHostWrites).
    assert out.serving == "server1", out
    assert os.listdir(ch.folder(tmp_path)) == [ch.HEARTBEAT]  # cleaned up either way


def test_unanswered_request_gives_up_after_the_bound(tmp_path: Path) -> None:
    _beat(tmp_path)
    t0 = time.monotonic()
    out = sc.ask(tmp_path, DIGEST, 30)
    assert isinstance(out, sc.NotAnswered) and out.reason.startswith(sc.NO_ANSWER)
    assert out.serving == "server1"
    ms = float(out.reason.split(" in ")[1].split(" ms")[0])
    assert ms >= 30  # waited its budget, and said how long
    assert time.monotonic() - t0 >= 0.03


def test_request_folder_not_writable(tmp_path: Path) -> None:
    _beat(tmp_path)
    (ch.folder(tmp_path) / ch.HEARTBEAT).rename(tmp_path / "beat")
    os.rmdir(ch.folder(tmp_path))
    ch.folder(tmp_path).mkdir()
    os.replace(tmp_path / "beat", ch.folder(tmp_path) / ch.HEARTBEAT)
    os.chmod(ch.folder(tmp_path), 0o500)
    try:
        if os.access(ch.folder(tmp_path), os.W_OK):
            pytest.skip("root writes anywhere")
        out = sc.ask(tmp_path, DIGEST, 30)
        assert isinstance(out, sc.NotAnswered)
        assert out.reason.startswith("share host: cannot write a request")
    finally:
        os.chmod(ch.folder(tmp_path), 0o700)


def test_read_slot_refuses_symlinks_and_fifos(tmp_path: Path) -> None:
    os.symlink("/dev/zero", tmp_path / "link")
    with pytest.raises(OSError):
        ch.read_slot(tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    assert ch.read_slot(tmp_path / "fifo") == b""  # never blocks


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=10), JSON, max_size=8))
def test_pad_is_one_slot_and_parses_back(doc: dict[str, Any]) -> None:
    try:
        data = ch.pad(doc)
    except ValueError:
        assert len(json.dumps(doc, separators=(",", ":"), ensure_ascii=True)) > ch.SLOT - 1
        return
    assert len(data) == ch.SLOT
    assert ch.parse(data) == doc
    # A reader that kept a shorter cached size sees a prefix: never a valid answer.
    assert ch.parse(data[: len(data) // 2]) in (None, doc)


class _Host:
    """A share host simulated on a fake clock: a request queued behind
    another run for `queued_s`, then running for `running_s`, then answered;
    its progress record gets a new beat every second, as the daemon writes."""

    def __init__(self, req: Path, queued_s: float, running_s: float) -> None:
        self.req, self.now = req, 0.0
        self.queued_s, self.running_s = queued_s, running_s
        self.beat = -1

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.001)
        beat = int(self.now)
        if beat == self.beat:
            return
        self.beat = beat
        if self.now >= self.queued_s + self.running_s:
            doc: dict[str, Any] = {"ok": True, "token": "ab"}
        else:
            state = "queued" if self.now < self.queued_s else "running"
            doc = {ch.WORKING: state, "op": "update", "beat": beat, "token": "ab"}
        self.req.write_bytes(ch.pad(doc, ch.WRITE_SLOT))


def test_the_write_bound_runs_from_the_start_of_the_run_not_from_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host stops a run WRITE_LIMIT_S after it starts, which may be long
    # after the request (queued behind another run): the client must not give
    # up on a run the host still allows.
    limit = 30.0  # the hour, shortened: the logic is the same, the polls fewer
    monkeypatch.setattr(sc, "WRITE_LIMIT_S", limit)
    req = tmp_path / "c-1-a.req"
    host = _Host(req, queued_s=limit * 0.8, running_s=limit * 0.9)
    host.sleep(0)
    monkeypatch.setattr(sc, "time", host)
    answer, why = sc._wait_write(req, "ab", 0.0, ch.ACK_S)
    assert why == "" and answer == {"ok": True, "token": "ab"}
    assert host.now > limit + ch.STALE_S  # past the old bound from the request


def test_a_run_past_the_hosts_limit_is_given_up_after_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 30.0
    monkeypatch.setattr(sc, "WRITE_LIMIT_S", limit)
    req = tmp_path / "c-1-a.req"
    queued_s = limit * 0.5
    host = _Host(req, queued_s=queued_s, running_s=limit * 2)
    host.sleep(0)
    monkeypatch.setattr(sc, "time", host)
    answer, why = sc._wait_write(req, "ab", 0.0, ch.ACK_S)
    assert answer is None and why == f"within {limit:.0f} s"
    assert queued_s + limit < host.now <= queued_s + limit + ch.STALE_S + 2
