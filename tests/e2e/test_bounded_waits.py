"""Every wait and retry loop has a bound (docs/reliability.md "Every wait has a
bound"). Bounds are checked by counting operations, never by timing them."""

from __future__ import annotations

import selectors
import socket
from pathlib import Path
from typing import Any

import pytest

from ctindex.daemon import server as server_mod
from ctindex.store import snapshot
from ctindex.store.durable import IndexCorrupt
from ctindex.store.generation import StoreManifest


class EndlessListener:
    """A listening socket with a client that never stops connecting."""

    def __init__(self, limit: int) -> None:
        self.accepted = 0
        self.limit = limit
        self.kept: list[socket.socket] = []

    def accept(self) -> tuple[socket.socket, Any]:
        self.accepted += 1
        if self.accepted > self.limit:  # the unbounded loop would never return
            raise AssertionError(f"accept loop did not yield after {self.limit} connections")
        ours, theirs = socket.socketpair()
        self.kept.append(theirs)
        return ours, None


@pytest.mark.needs("peercred")  # the server drops peers it cannot authenticate
def test_accept_loop_yields_to_the_daemon_loop_under_a_connect_flood(tmp_path: Path) -> None:
    sel = selectors.DefaultSelector()
    served: list[dict[str, Any]] = []
    ipc = server_mod.IpcServer(
        tmp_path / "s.sock", sel, lambda c, r: served.append(r), clock=lambda: 0.0
    )
    listener = EndlessListener(limit=10 * server_mod.ACCEPT_BATCH)
    ipc._listener = listener  # type: ignore[assignment]
    try:
        ipc.on_event(ipc, selectors.EVENT_READ)
        assert listener.accepted == server_mod.ACCEPT_BATCH
        assert ipc.connections == server_mod.ACCEPT_BATCH
        ipc.on_event(ipc, selectors.EVENT_READ)  # the next turn takes the next batch
        assert listener.accepted == 2 * server_mod.ACCEPT_BATCH
    finally:
        ipc._listener = None
        ipc.close()
        for s in listener.kept:
            s.close()
        sel.close()


def test_reader_retry_is_bounded_under_a_writer_that_publishes_continuously(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each manifest read names a newer generation whose files are already
    gone by the time they are opened (a writer publishing without pause): the
    reader gives up after RETRIES attempts with IndexCorrupt (the query then
    repairs or answers from the files), sleeping a bounded total."""
    published = iter(range(1, 10_000))
    reads: list[int] = []
    slept: list[float] = []

    def read_manifest(_index_dir: Path) -> StoreManifest:
        reads.append(1)
        return StoreManifest(generation=next(published))

    def open_gone(_index_dir: Path, _m: StoreManifest) -> snapshot.Snapshot:
        raise FileNotFoundError("segment retired by a newer generation")

    monkeypatch.setattr(snapshot, "read_manifest", read_manifest)
    monkeypatch.setattr(snapshot, "_open", open_gone)
    monkeypatch.setattr(snapshot.time, "sleep", slept.append)
    with pytest.raises(IndexCorrupt):
        snapshot.with_snapshot(tmp_path, lambda snap: snap.generation)
    assert len(reads) == snapshot.RETRIES
    assert sum(slept) <= 0.002 * snapshot.RETRIES * (snapshot.RETRIES + 1) / 2
