"""The share's soak: random work on a real sshfs share with its host's daemon
(docs/network-shares.md), every answer checked against tests/oracle.py run
on the host's own files.

The driver (this process, outside the rig) picks each step with a seeded
random generator:

* edits on the host (create, rewrite, delete a page);
* edits through two client mounts (A with sshfs's default caches, B
  without), made by two client processes inside the rig that also ask the
  queries; B reports another ctindex build, as a client of another version
  would;
* `update` asked by a client (run by the host, or refused while it beats
  and cannot: never written by the client then);
* the host's daemon stopped (SIGSTOP) for up to 7 s and continued, killed
  (SIGKILL) and started again, or stopped cleanly and started again.

Every `watcher-clean` answer must hold exactly the pages the oracle finds:
a divergence fails the test, and so does an error. Answers from the files
and the clients' own walks are compared too and their divergences counted
(through A's caches they may lag, and they say they are not vouched for).
`CTINDEX_SHARE_SOAK_OPS` sets the number of steps
(60 in the suite; `nox -s share-soak` runs 5,000).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.conftest import CORPUS
from tests.daemon_support import require_daemon
from tests.netshare import Rig, rig_for_test, unavailable
from tests.netshare import host_ctindex as _host

# On the sshfs rig: the slow tier (tests/conftest.py, TIERS).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
]

BUNDLE = "acme_retail"
WORDS = [f"zqxv7soak{i:02}" for i in range(12)]
PAGES = 16
ENV = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
OPS = int(os.environ.get("CTINDEX_SHARE_SOAK_OPS", "60"))

# One client: JSON lines in, JSON lines out. In-process API calls through
# the mount, so a step costs the share's round trips, not Python's start.
CLIENT = r"""
import json, os, sys
import ctindex
from ctindex.ipc import build_id
root, other = sys.argv[1], sys.argv[2] == "other"
if other:
    build_id._build_id = "0" * 32  # a client of another version
index = ctindex.Index(root)
for line in sys.stdin:
    step = json.loads(line)
    try:
        if step["op"] == "search":
            got = index.search(step["word"], limit=1000)
            out = {"mode": got.freshness.mode, "reason": got.freshness.reason,
                   "paths": sorted(h.path for h in got.hits)}
        elif step["op"] == "write":
            try:
                with open(os.path.join(root, step["path"]), "w") as f:
                    f.write(step["text"])
                out = {}
            except OSError as exc:  # a cached entry of a file deleted on the host
                out = {"refused": exc.strerror}
        elif step["op"] == "rm":
            try:
                os.unlink(os.path.join(root, step["path"]))
            except FileNotFoundError:
                pass
            out = {}
        else:
            report = index.update()
            here = any(n.endswith("written over the share by this host") for n in report.notes)
            out = {"written": "here" if here else "by host"}
    except ctindex.CtindexError as exc:
        out = {"error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(out), flush=True)
"""


class Client:
    def __init__(self, rig: Rig, root: Path, other: bool) -> None:
        self.proc = subprocess.Popen(
            [*rig.nsenter(), sys.executable, "-c", CLIENT, str(root), "other" if other else "same"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )

    def ask(self, **step: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(step) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"client ended: {self.proc.poll()}"
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _pid(root: Path) -> int | None:
    try:
        return int((root / ".ct/okf/runtime/daemon.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return b"ctindex.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Rig]:
    require_daemon()
    yield from rig_for_test(tmp_path / "rig")


def test_share_soak_every_watcher_clean_answer_is_the_oracles(net: Rig) -> None:
    server = net.export / "proj"
    shutil.copytree(CORPUS / BUNDLE, server / "okf" / "bundles" / BUNDLE)
    (server / ".git").mkdir()
    assert _host(server, "watch", "start").returncode == 0
    rng = random.Random(int(os.environ.get("CTINDEX_SHARE_SOAK_SEED", "40")))
    clients = {
        # A with sshfs's default caches (its own 20 s listing and attribute
        # cache): an answer labelled fresh must be right through them too.
        "A": Client(net, net.mount("hostA", options=()) / "proj", other=False),
        "B": Client(net, net.mount("hostB") / "proj", other=True),
    }
    tally: Counter[str] = Counter()
    spent: Counter[str] = Counter()  # seconds per kind of step
    wrong: list[str] = []
    stopped: int | None = None
    stopped_until = 0.0
    try:
        for step in range(OPS):
            now = time.monotonic()
            if stopped is not None and now >= stopped_until:
                os.kill(stopped, signal.SIGCONT)
                stopped = None
            roll = rng.random()
            before = dict(tally)
            page = f"okf/bundles/{BUNDLE}/zz_soak{rng.randrange(PAGES):02}.md"
            text = "# Soak\n\n" + " ".join(rng.sample(WORDS, rng.randint(1, 4))) + "\n"
            text += "x" * rng.randrange(4)  # sizes differ from one rewrite to the next
            who = rng.choice("AB")
            if roll < 0.45:
                word = rng.choice(WORDS)
                got = clients[who].ask(op="search", word=word)
                if "error" in got:
                    tally[f"error {got['error']}"] += 1
                    wrong.append(f"step {step} {who} {word}: {got}")
                    continue
                want = sorted(oracle.containing(server, word))
                kind = got["mode"]
                if "answered from the files" in (got["reason"] or ""):
                    kind = "from-the-files"
                tally[kind] += 1
                if got["paths"] != want:
                    entry = (
                        f"step {step} {who} {word} {kind} {got['reason']}: {got['paths']} != {want}"
                    )
                    if got["mode"] == "watcher-clean":
                        wrong.append(entry)
                    else:
                        # By client: only A's caches may make a walk lag.
                        tally[f"divergent {kind} via {who}"] += 1
            elif roll < 0.62:
                (server / page).write_text(text)
                tally["host edit"] += 1
            elif roll < 0.68:
                (server / page).unlink(missing_ok=True)
                tally["host delete"] += 1
            elif roll < 0.85:
                got = clients[who].ask(op="write", path=page, text=text)
                tally["client edit" if "refused" not in got else "client edit refused"] += 1
            elif roll < 0.88:
                clients[who].ask(op="rm", path=page)
                tally["client delete"] += 1
            elif roll < 0.94:
                got = clients[who].ask(op="update")
                tally[f"update {got.get('written') or got.get('error')}"] += 1
            elif stopped is None:
                pid = _pid(server)
                chaos = rng.random()
                if not _alive(pid):
                    assert _host(server, "watch", "start").returncode == 0
                    tally["host started"] += 1
                elif chaos < 0.5:
                    assert pid is not None
                    os.kill(pid, signal.SIGSTOP)
                    stopped, stopped_until = pid, time.monotonic() + rng.uniform(0.2, 7.0)
                    tally["host stopped"] += 1
                elif chaos < 0.75:
                    assert pid is not None
                    os.kill(pid, signal.SIGKILL)
                    tally["host killed"] += 1
                else:
                    _host(server, "watch", "stop")
                    tally["host stop"] += 1
            for key, count in tally.items():
                if before.get(key) != count:
                    spent[key] += time.monotonic() - now
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        for client in clients.values():
            client.close()
        _host(server, "watch", "stop")
        pid = _pid(server)
        if _alive(pid):
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
    print(f"share soak: {OPS} steps: {dict(sorted(tally.items()))}")
    print(f"seconds: { {k: round(v, 1) for k, v in sorted(spent.items())} }")
    assert not wrong, wrong[:5]
    assert tally["watcher-clean"] > 0 and tally["host stopped"] + tally["host killed"] > 0
