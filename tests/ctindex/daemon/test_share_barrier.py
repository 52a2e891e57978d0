"""The share host's side of the barrier through a share
(ctindex/daemon/share_barrier.py): requests seen by a real watcher,
answered into their own file, the heartbeat, collection and the caps."""

from __future__ import annotations

import os
import selectors
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex.client import share as sc
from ctindex.daemon import share_barrier as sb
from ctindex.ipc import share_channel as ch


class Host:
    """A ShareHost whose barriers answer at once (or are kept, `hold`)."""

    def __init__(self, root: Path, hold: bool = False) -> None:
        self.index_dir = root / ".ct" / "okf"
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.sel = selectors.DefaultSelector()
        self.started: list[sb.ShareRequest] = []
        self.hold = hold
        self.share = sb.ShareHost(
            root,
            self.index_dir,
            "inst1",
            lambda key: sb.open_folder_watcher(root, key),
            self.start,
            time.time,
        )

    def start(self, req: sb.ShareRequest, doc: dict[str, Any], _now: float) -> None:
        self.started.append(req)
        if not self.hold:
            self.answer(req, doc)

    def answer(self, req: sb.ShareRequest, doc: dict[str, Any]) -> None:
        req.respond(
            {
                "ok": True,
                "generation": 3,
                "instance": "inst1",
                "lane": "clean",
                "backend": "inotify",
                "backend_reason": None,
                "degraded": None,
                "plan": doc.get("plan"),
                "reconciled": False,
                "reconcile_reason": None,
                "reconcile_ms": None,
                "barrier_ms": 0.5,
                "identity": "id-3",
                "outside": None,
            }
        )

    def pump(self, until: float) -> None:
        while time.monotonic() < until:
            for _key, _mask in self.sel.select(0.01):
                self.share.read()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path)
    h.share.open(h.sel)
    yield h
    h.share.close(h.sel)


def _ask(h: Host, budget_ms: int = 3000) -> sc.Answered | sc.NotAnswered:
    out: list[sc.Answered | sc.NotAnswered] = []
    t = threading.Thread(target=lambda: out.append(sc.ask(h.index_dir, "p" * 64, budget_ms)))
    t.start()
    deadline = time.monotonic() + budget_ms / 1000 + 2
    while t.is_alive() and time.monotonic() < deadline:
        h.pump(time.monotonic() + 0.02)
    t.join(5)
    return out[0]


def test_a_client_request_is_answered_in_its_own_file(host: Host) -> None:
    out = _ask(host)
    assert isinstance(out, sc.Answered), out
    assert (out.result.generation, out.result.identity) == (3, "id-3")
    assert out.host == ch.hostname()
    assert len(host.started) == 1 and host.share.answered == 1
    assert os.listdir(host.share.folder) == [ch.HEARTBEAT]


def test_heartbeat_record_and_modes(host: Host) -> None:
    doc = ch.parse((host.share.folder / ch.HEARTBEAT).read_bytes())
    assert doc is not None and doc["instance"] == "inst1" and doc["pid"] == os.getpid()
    assert abs(doc["wall"] - time.time()) < 60
    # Modes follow the store's folder (the daemon runs with umask 077).
    mode = os.stat(host.index_dir).st_mode & 0o777
    assert os.stat(host.share.folder).st_mode & 0o777 == mode | 0o700
    assert os.stat(host.share.folder / ch.HEARTBEAT).st_mode & 0o777 == (mode & 0o666) | 0o600


def test_the_modes_follow_a_store_opened_to_its_group_while_serving(host: Host) -> None:
    """A project that shares its index with a group: the daemon's first
    pass makes `.ct/okf` 2770 after the folder here was made. The next beat
    opens the folder and the heartbeat to the group, so members can ask."""
    os.chmod(host.index_dir, 0o700)
    host.share.beat()
    assert os.stat(host.share.folder).st_mode & 0o7777 == 0o700
    assert os.stat(host.share.folder / ch.HEARTBEAT).st_mode & 0o777 == 0o600
    os.chmod(host.index_dir, 0o2770)
    host.share.beat()
    assert os.stat(host.share.folder).st_mode & 0o7777 == 0o2770
    assert os.stat(host.share.folder / ch.HEARTBEAT).st_mode & 0o777 == 0o660
    assert isinstance(_ask(host), sc.Answered)


def test_close_removes_only_its_own_heartbeat(tmp_path: Path) -> None:
    h = Host(tmp_path)
    h.share.open(h.sel)
    h.share.close(h.sel)
    assert not (h.share.folder / ch.HEARTBEAT).exists()
    h.share.open(h.sel)
    (h.share.folder / ch.HEARTBEAT).write_bytes(ch.pad({"instance": "other", "wall": 1}))
    h.share.close(h.sel)
    assert (h.share.folder / ch.HEARTBEAT).exists()  # a successor's, kept


def test_junk_and_answers_are_not_taken_as_requests(host: Host) -> None:
    folder = host.share.folder
    (folder / "junk.req").write_bytes(b"not json")
    (folder / "wrong-op.req").write_bytes(ch.pad({"op": "rebuild-everything", "token": "ab"}))
    (folder / "answered.req").write_bytes(ch.pad({"ok": True, "token": "ab"}))
    (folder / "writing.new").write_bytes(b"")
    host.pump(time.monotonic() + 0.3)
    assert host.started == []
    names = set(os.listdir(folder))
    assert "junk.req" not in names and "wrong-op.req" not in names  # nobody waits: deleted
    assert {"answered.req", "writing.new"} <= names  # a client's, left to it / collection


def test_no_stray_answer_when_the_client_gave_up(tmp_path: Path) -> None:
    h = Host(tmp_path, hold=True)
    h.share.open(h.sel)
    try:
        (h.share.folder / "c-1-a.req").write_bytes(ch.pad({"op": "barrier", "token": "ab"}))
        h.pump(time.monotonic() + 0.3)
        [req] = h.started
        os.unlink(h.share.folder / "c-1-a.req")
        req.respond({"ok": True})
        assert os.listdir(h.share.folder) == [ch.HEARTBEAT]
        assert h.share.pending == {}
    finally:
        h.share.close(h.sel)


def test_in_flight_cap_and_collection_bound_a_flood(tmp_path: Path) -> None:
    h = Host(tmp_path, hold=True)
    h.share.open(h.sel)
    try:
        folder = h.share.folder
        count = sb.KEEP_FILES + sb.IN_FLIGHT * 2
        for i in range(count):
            tmp = folder / f"f-{i:05}.new"
            tmp.write_bytes(ch.pad({"op": "barrier", "token": f"{i:04x}"}))
            os.rename(tmp, folder / f"f-{i:05}.req")
        h.pump(time.monotonic() + 0.5)
        assert len(h.started) == sb.IN_FLIGHT  # served at once
        assert len(h.share.waiting) == sb.KEEP_FILES  # wait their turn
        assert h.share.dropped == count - sb.IN_FLIGHT - sb.KEEP_FILES  # beyond the folder's bound
        # Old leftovers (a client that died mid-request) and a crowd beyond KEEP_FILES.
        old = time.time() - sb.MAX_AGE_S - 5
        for i in range(sb.KEEP_FILES + 40):
            path = folder / f"left-{i:05}.new"
            path.write_bytes(b"")
            if i < 20:
                os.utime(path, (old, old))
        h.share.beat()
        left = [n for n in os.listdir(folder) if n != ch.HEARTBEAT and n not in h.share.pending]
        assert len(left) == sb.KEEP_FILES
        assert not any(n.startswith("left-0000") for n in left)  # the oldest went first
    finally:
        h.share.close(h.sel)


def test_a_burst_beyond_the_in_flight_cap_is_answered_not_dropped(tmp_path: Path) -> None:
    """200 clients at once: 64 served, the rest queued and started as the
    answers free slots (each answer's rename wakes the folder's watcher)."""
    h = Host(tmp_path, hold=True)
    h.share.open(h.sel)
    try:
        folder = h.share.folder
        for i in range(200):
            tmp = folder / f"b-{i:05}.new"
            tmp.write_bytes(ch.pad({"op": "barrier", "token": f"{i:04x}", "plan": "p"}))
            os.rename(tmp, folder / f"b-{i:05}.req")
        h.pump(time.monotonic() + 0.3)
        assert len(h.started) == sb.IN_FLIGHT and len(h.share.waiting) == 200 - sb.IN_FLIGHT
        answered = 0
        deadline = time.monotonic() + 30
        while answered < 200 and time.monotonic() < deadline:
            held = h.started[answered:]
            for req in held:
                h.answer(req, {"plan": "p"})  # as the barrier's pass would
            answered += len(held)
            h.pump(time.monotonic() + 0.1)
        assert answered == 200 and h.share.dropped == 0 and not h.share.waiting
        assert h.share.answered == 200
        assert sorted(r.name for r in h.started) == sorted(f"b-{i:05}.req" for i in range(200))
    finally:
        h.share.close(h.sel)


def test_an_answer_always_fits_its_slot(host: Host) -> None:
    (host.share.folder / "c-1-b.req").write_bytes(ch.pad({"op": "barrier", "token": "ab"}))
    host.hold = True
    host.pump(time.monotonic() + 0.3)
    [req] = host.started
    req.respond({"ok": False, "error": "x" * 5000, "instance": "inst1"})
    data = (host.share.folder / "c-1-b.req").read_bytes()
    assert len(data) == ch.SLOT
    doc = ch.parse(data)
    assert doc is not None and doc["ok"] is False and doc["token"] == "ab"


def _old_file(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_bytes(b"keep me")
    old = time.time() - sb.MAX_AGE_S - 60
    os.utime(path, (old, old))
    return path


@pytest.mark.parametrize("swapped", ["barrier", "okf"])
def test_a_folder_swapped_for_a_link_stops_the_share_host_it_is_never_followed(
    tmp_path: Path, swapped: str
) -> None:
    # Every share client can write `.ct/okf`: one that puts a link to another
    # folder where `barrier/` (or `okf/` itself) was would have the host's
    # collection delete that folder's old files and write host.json into it.
    h = Host(tmp_path / "proj", hold=True)
    logged: list[str] = []
    h.share.log = lambda event, **_fields: logged.append(event)
    h.share.open(h.sel)
    try:
        victim = tmp_path / "victim"
        (victim / ch.FOLDER).mkdir(parents=True)
        precious = [_old_file(victim, "precious.req"), _old_file(victim / ch.FOLDER, "x.req")]
        moved = h.share.folder if swapped == "barrier" else h.index_dir
        os.rename(moved, tmp_path / "moved-away")
        os.symlink(victim, moved)
        h.share.beat()
        h.share.beat()
        assert all(p.read_bytes() == b"keep me" for p in precious)
        assert not (victim / ch.HEARTBEAT).exists()
        assert not (victim / ch.FOLDER / ch.HEARTBEAT).exists()
        assert logged == ["share-barrier-off"] and h.share.watcher is None
        # A request written there now is nobody's to answer: it stays.
        (victim / "c-1-a.req").write_bytes(ch.pad({"op": "barrier", "token": "ab"}))
        h.pump(time.monotonic() + 0.2)
        assert h.started == [] and (victim / "c-1-a.req").exists()
    finally:
        h.share.close(h.sel)


def test_an_answer_in_flight_when_the_folder_is_swapped_is_not_written_through_the_link(
    tmp_path: Path,
) -> None:
    h = Host(tmp_path / "proj", hold=True)
    h.share.open(h.sel)
    try:
        (h.share.folder / "c-1-a.req").write_bytes(ch.pad({"op": "barrier", "token": "ab"}))
        h.pump(time.monotonic() + 0.3)
        [req] = h.started
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / "c-1-a.req").write_bytes(b"keep me")
        os.rename(h.share.folder, tmp_path / "moved-away")
        os.symlink(victim, h.share.folder)
        req.respond({"ok": True})
        assert (victim / "c-1-a.req").read_bytes() == b"keep me"
        assert os.listdir(victim) == ["c-1-a.req"]
    finally:
        h.share.close(h.sel)


def test_a_request_name_longer_than_the_bound_is_dropped_unanswered(host: Host) -> None:
    # Near NAME_MAX its answer's temporary name could not be made: it would
    # wait unanswered until its client gave up.
    folder = host.share.folder
    long = "c" * (sb.NAME_BOUND - len(ch.REQUEST) + 1) + ch.REQUEST
    bounded = "d" * (sb.NAME_BOUND - len(ch.REQUEST)) + ch.REQUEST
    for name in (long, bounded):
        (folder / name).write_bytes(ch.pad({"op": "barrier", "token": "ab"}))
    host.pump(time.monotonic() + 0.3)
    assert [r.name for r in host.started] == [bounded]
    assert not (folder / long).exists() and host.share.dropped == 1
    doc = ch.parse((folder / bounded).read_bytes())
    assert doc is not None and doc["ok"] is True
