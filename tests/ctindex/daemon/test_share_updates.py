"""Updates and rebuilds asked through the share (ctindex/daemon/share_updates.py):
real `ctindex --json update` runs on a real project, requests written as a
client writes them, answered into their own files; one run at a time, the
requests waiting for an op share its next run, a request whose client
gave up never runs, and a stop answers every waiting client."""

from __future__ import annotations

import os
import selectors
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex.daemon import share_barrier as sb
from ctindex.daemon import share_updates as su
from ctindex.ipc import share_channel as ch
from ctindex.store.generation import read_manifest
from ctindex.store.lock import update_lock
from tests.conftest import CORPUS


class Host:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.index_dir = root / ".ct" / "okf"
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.sel = selectors.DefaultSelector()
        self.logged: list[tuple[str, dict[str, Any]]] = []
        self.share = sb.ShareHost(
            root,
            self.index_dir,
            "inst1",
            lambda key: sb.open_folder_watcher(root, key),
            lambda req, _doc, _now: None,
            time.time,
            start_write=lambda req, _request, _now: self.runs.add(req),
            log=lambda event, **fields: self.logged.append((event, fields)),
        )
        self.runs = su.ShareUpdates(
            self.share, root, self.sel, time.monotonic, self.published, self.share.log
        )

    def published(self) -> dict[str, Any]:
        m = read_manifest(self.index_dir)
        assert m is not None
        return {"generation": m.generation, "identity": m.identity, "plan": m.plan_digest}

    def request(self, name: str, op: str = "update") -> Path:
        doc = {"op": op, "token": name.encode().hex(), "plan": None, "client": "c", "build": "b"}
        path = self.share.folder / f"{name}.req"
        tmp = self.share.folder / f"{name}.new"
        tmp.write_bytes(ch.pad(doc, ch.slot_for(op)))
        os.rename(tmp, path)
        return path

    def pump(self, until: float) -> None:
        while time.monotonic() < until:
            for key, _mask in self.sel.select(0.02):
                if key.data == su.RUN_KEY:
                    self.runs.read()
                else:
                    self.share.read()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    root = tmp_path / "proj"
    shutil.copytree(CORPUS / "acme_retail", root / "okf" / "bundles" / "acme_retail")
    (root / ".git").mkdir()
    h = Host(root)
    h.share.open(h.sel)
    yield h
    h.runs.close("test over")
    h.share.close(h.sel)


def _answer(path: Path) -> dict[str, Any] | None:
    doc = ch.parse(path.read_bytes())
    return doc if doc is not None and "ok" in doc else None


def _until_answered(host: Host, paths: list[Path], limit_s: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all(_answer(p) for p in paths):
        host.pump(time.monotonic() + 0.05)
        host.runs.beat()
    answers = [_answer(p) for p in paths]
    assert all(answers), [p.read_bytes()[:200] for p in paths]
    return [a for a in answers if a is not None]


def _until(host: Host, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline
        host.pump(time.monotonic() + 0.02)


def test_one_run_at_a_time_and_waiting_requests_share_the_next(host: Host) -> None:
    # Another writer holds the lock: the first run waits for it, under way.
    with update_lock(host.index_dir, 60):
        first = host.request("aa")
        _until(host, lambda: host.runs.running is not None)  # started at once
        # Arrive while it runs: both wait for the next run of their op.
        second, third = host.request("bb"), host.request("cc")
        _until(host, lambda: len(host.runs.queued.get("update", [])) == 2)
        doc = ch.parse(second.read_bytes())
        assert doc is not None and doc[ch.WORKING] == "queued" and "ok" not in doc
        assert len(second.read_bytes()) == ch.WRITE_SLOT  # the request's own size
        assert host.runs.running is not None and host.runs.runs == 0
    a1, a2, a3 = _until_answered(host, [first, second, third])
    assert host.runs.runs == 2 and [e for e, _ in host.logged].count("share-run") == 2
    for answer, token in ((a1, "aa"), (a2, "bb"), (a3, "cc")):
        assert answer["ok"] is True and answer["token"] == token.encode().hex()
        assert answer["report"]["documents"] > 0 and "problems" not in answer["report"]
        assert answer["identity"] == host.published()["identity"] or answer is a1
    assert a2["report"] == a3["report"] and a2["generation"] == a3["generation"]
    assert a1["report"]["published"] and not a2["report"]["published"]


def test_a_request_whose_client_gave_up_never_runs(host: Host) -> None:
    with update_lock(host.index_dir, 60):  # the first run waits, under way
        running = host.request("aa")
        _until(host, lambda: host.runs.running is not None)
        gone = host.request("bb", "rebuild")
        _until(host, lambda: "rebuild" in host.runs.queued)
        gone.unlink()  # Ctrl-C on its client
        host.runs.beat()
        assert not host.runs.queued and gone.name not in host.share.pending
    (answer,) = _until_answered(host, [running])
    assert answer["ok"] is True and host.runs.runs == 1
    assert not gone.exists()  # no stray answer or progress record


def test_a_stop_answers_every_waiting_client(host: Host) -> None:
    with update_lock(host.index_dir, 60):  # the run waits, under way
        running, queued = host.request("aa"), host.request("bb", "rebuild")
        _until(host, lambda: "rebuild" in host.runs.queued)
        host.runs.close("daemon stopping: test")
    for path in (running, queued):
        answer = _answer(path)
        assert answer is not None and answer == {**answer, "ok": False}
        assert answer["error"] == "daemon stopping: test"
    assert not host.runs.busy


def test_a_module_dropped_in_the_project_never_runs_in_the_hosts_run(host: Host) -> None:
    # Every share client can write the project folder: a run started there with
    # `-m` would import this file ahead of the standard library's argparse.
    marker = host.root / "pwned"
    (host.root / "argparse.py").write_text(
        f"open({os.fspath(marker)!r}, 'w').close()\nraise SystemExit(0)\n"
    )
    (host.root / "ctindex").mkdir()
    (host.root / "ctindex" / "__init__.py").write_text(
        f"open({os.fspath(marker)!r}, 'w').close()\n"
    )
    (answer,) = _until_answered(host, [host.request("aa")])
    assert not marker.exists()
    assert answer["ok"] is True and answer["report"]["documents"] > 0
