"""Robustness, security (docs/reliability.md, "Security"):
Nothing outside the canonical scope is ever opened, runtime
files are private, and neither query text nor content reaches logs or status.

Other-uid refusal of the daemon endpoint (a setresuid child) is
tests/e2e/test_acceptance_12_9_lifecycle.py::test_peer_of_another_uid_is_refused;
malformed, oversized and half-written requests are
tests/ctindex/daemon/test_server.py::test_bad_requests_only_cost_their_own_connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctindex.backends import inotify_c as ic
from ctindex.client.daemon_requests import barrier, request
from ctindex.reconciler.platform_features import has_dir_fd
from tests.conftest import cli_main, write_config
from tests.daemon_support import CliProject

SECRET = "xylocarpsecret"  # only in the outside folder


class OpenSpy:
    """inotify IN_OPEN on a folder: any open of it (a listing) or of a file
    in it, by any process, is recorded. The test itself opens nothing there."""

    def __init__(self, folder: Path) -> None:
        self.lib = ic.libc()
        self.fd = self.lib.init1()
        self.lib.add_watch(self.fd, os.fsencode(folder), ic.IN_OPEN | ic.IN_ACCESS)

    def opened(self) -> list[str]:
        """Each event as "open NAME" or "read NAME" ("." the folder itself)."""
        seen = []
        while select.select([self.fd], [], [], 0)[0]:
            for e in ic.read_events(self.fd):
                kind = "read" if e.mask & ic.IN_ACCESS else "open"
                seen.append(f"{kind} {os.fsdecode(e.name) or '.'}")
        return seen

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def swap_project(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root = tmp_path / "p"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    # Named like a file inside: a walk led outside by a swapped parent would
    # find it under the name it expects (ctindex/reconciler/path_folders.py).
    (outside / "inside.md").write_text(f"# Inside\n\n{SECRET}\n")
    write_config(root, "kb", watch=False)
    (root / "kb" / "sw").mkdir(parents=True)
    (root / "kb" / "sw" / "inside.md").write_text("# Inside\n\ninsideword\n")
    (root / "kb" / "top.md").write_text("# Top\n\ntopword\n")
    yield root, outside


def swap_loop(folder: Path, outside: Path, stop: threading.Event, hold: float = 0.0) -> int:
    """Replace `folder`/sw by a symlink to the outside folder and back (keeping
    the symlink in place `hold` seconds) until `stop`; returns the swaps made."""
    sw, real, link = folder / "sw", folder / ".sw-real", folder / ".sw-link"
    swaps = 0
    while not stop.is_set():
        with contextlib.suppress(FileNotFoundError, FileExistsError):
            os.symlink(outside, link)
        with contextlib.suppress(OSError):
            os.rename(sw, real)
            os.rename(link, sw)  # now a symlink to outside
            if hold:
                time.sleep(hold)
            os.rename(sw, link)
            os.rename(real, sw)  # the real folder again
            swaps += 1
    return swaps


@contextlib.contextmanager
def swap_race(folder: Path, outside: Path, hold: float = 0.0) -> Iterator[list[int]]:
    """Run swap_loop in a thread while the body runs. On exit the yielded list
    holds the number of swaps made, and nothing in `outside` may have been
    opened meanwhile (by any process).

    Without dir_fd (Windows, CTINDEX_SIMULATE=no-dir-fd) less is promised:
    nothing can be checked before it is opened by path, so a swap landing
    between path_folders' lstat and an open makes that open reach the
    outside folder (a listing of ".", or a same-named file). The identity
    checks after it discard the listing and close the file unread
    (docs/decisions/portability.md): no file in it may be read even then,
    where the system tells an open file's real path (path_folders'
    `final_path`); where it does not, a swap out and back between the
    checks (ABA) can still read one, and only the index is checked."""
    spy = OpenSpy(outside)
    stop = threading.Event()
    swaps: list[int] = []
    thread = threading.Thread(target=lambda: swaps.append(swap_loop(folder, outside, stop, hold)))
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join()
        try:
            opened = spy.opened()
        finally:
            spy.close()
    if not has_dir_fd():
        from ctindex.reconciler import path_folders

        opened = [seen for seen in opened if seen.startswith("read ") and seen != "read ."]
        if not path_folders.tells_final_path():
            opened = []  # the ABA window this system leaves (path_folders' note)
    assert opened == [], f"opened outside the scope: {opened}"


def test_robust_security_symlink_swap_race_never_opens_outside(
    swap_project: tuple[Path, Path],
) -> None:
    from ctindex.indexing import transaction
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    root, outside = swap_project
    project = Project.at(root)
    plan = load_plan(project)
    with swap_race(root / "kb", outside) as swaps:
        deadline = time.monotonic() + 3.0
        passes = 0
        while time.monotonic() < deadline or passes < 30:
            if passes % 3 == 1:
                transaction.update(project, plan)  # full reconcile
            elif passes % 3 == 2:  # reads deferred to where they are parsed
                transaction.rebuild(project, plan)
            else:  # the daemon's narrowed path, as if an event named kb/sw
                transaction.update_paths(project, plan, ["kb/sw", "kb/sw/inside.md"])
            passes += 1
            assert SECRET not in json.dumps(_all_keys(root))
    assert swaps and swaps[0] > 10, swaps  # the race really ran
    # out + err: the JSON must parse with nothing else printed, as before
    result = cli_main("-C", str(root), "--json", "search", SECRET)
    assert result.code == 1 and json.loads(result.out + result.err)["total"] == 0
    result = cli_main("-C", str(root), "--json", "search", "--direct", SECRET)
    assert result.code == 1 and json.loads(result.out + result.err)["total"] == 0


def _all_keys(root: Path) -> list[str]:
    from ctindex.store.snapshot import with_snapshot

    return with_snapshot(
        root / ".ct" / "okf",
        lambda snap: [k for v in snap.views for k in v.segment.keys()],  # noqa: SIM118
    )


def test_robust_security_direct_oracle_under_swap_race(swap_project: tuple[Path, Path]) -> None:
    """The --direct oracle walks with O_NOFOLLOW relative to folder descriptors
    too: racing it never makes it list or read the outside folder."""
    root, outside = swap_project
    with swap_race(root / "kb", outside):
        for _ in range(40):
            result = cli_main(
                "-C", str(root), "--json", "search", "--direct", f"{SECRET} OR insideword"
            )
            out = result.out + result.err
            assert SECRET not in out.replace(f"{SECRET} OR insideword", "")


QUERY_WORD = "quokkaqueryonly"  # in no document: only the query carries it
CONTENT_WORD = "wombatcontentonly"


def test_robust_security_no_query_text_or_content_in_runtime_files(cli_project: CliProject) -> None:
    p = cli_project
    (p.root / "ga4" / "w.md").write_text(f"# W\n\n{CONTENT_WORD} {CONTENT_WORD}\n")
    p.check("margin")
    p.wait_daemon()
    p.check(f"{QUERY_WORD} OR {CONTENT_WORD}")
    p.search(f'"{QUERY_WORD} {CONTENT_WORD}"')
    p.cli("status")
    p.cli("watch", "status")
    p.cli("watch", "stop")
    leaks = []
    for folder in (p.paths.dir, p.root / ".ct" / "okf"):
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.startswith("seg-"):
                data = path.read_bytes()
                if QUERY_WORD.encode() in data or CONTENT_WORD.encode() in data:
                    leaks.append(str(path))
    for path in (p.root / ".ct" / "okf").glob("seg-*.seg"):
        if QUERY_WORD.encode() in path.read_bytes():  # segments hold content, never queries
            leaks.append(str(path))
    assert leaks == []
    assert any(p.paths.dir.iterdir())  # the daemon did write its files


def test_robust_security_runtime_files_are_private(cli_project: CliProject) -> None:
    p = cli_project
    p.check("margin")
    p.wait_daemon()
    p.cli("watch", "stop")
    p.check("margin")  # a second daemon life: spawn.claim, log rotation, ...
    p.wait_daemon()
    loose = []
    for path in [p.paths.dir, *p.paths.dir.rglob("*")]:
        st = path.lstat()
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            loose.append(f"{path} {stat.filemode(st.st_mode)}")
    sock = p.paths.socket
    if p.paths.socket_is_fallback:  # a long path: the short per-user folder
        st = sock.parent.lstat()
        assert stat.S_IMODE(st.st_mode) == 0o700
    assert loose == []


def test_robust_security_slow_clients_do_not_block_others(cli_project: CliProject) -> None:
    """Fifty connections that dribble half a request, byte by byte, while
    barriers from a well-behaved client are still answered."""
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    p = cli_project
    p.check("margin")
    p.wait_daemon()
    digest = load_plan(Project.at(p.root)).digest()
    slow = []
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.fspath(p.paths.socket))
        slow.append(s)
    try:
        for i in range(10):
            for s in slow:
                with contextlib.suppress(OSError):
                    s.send(b'{"op":"barrier"'[i : i + 1])
            result = barrier(p.paths, digest, 5000)
            assert result.generation is not None
        answered = request(p.paths, {"op": "status"}, 5)
        assert answered.get("ok", True)
    finally:
        for s in slow:
            s.close()
    shutil.rmtree(p.root / "ga4" / "tables")  # and the daemon still indexes changes
    assert p.check("margin")["mode"] in ("watcher-clean", "fallback")


@pytest.mark.slow
def test_robust_security_daemon_events_during_swap_race_never_open_outside(
    cli_project: CliProject, tmp_path: Path
) -> None:
    """The same race against a real daemon: its events name kb/sw while it
    flips between a folder and a symlink to the outside; searches (barriers)
    run meanwhile. Nothing outside is opened, the secret never appears."""
    p = cli_project
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    # Named like a file inside: a walk led outside by a swapped parent would
    # find it under the name it expects (ctindex/reconciler/path_folders.py).
    (outside / "inside.md").write_text(f"# Inside\n\n{SECRET}\n")
    kb = p.root / "ga4"
    (kb / "sw").mkdir()
    (kb / "sw" / "inside.md").write_text("# Inside\n\ninsideword\n")
    p.check("insideword")
    p.wait_daemon()
    with swap_race(kb, outside, hold=0.001):
        for _ in range(15):
            doc = p.search(f"{SECRET} OR insideword")
            assert SECRET not in json.dumps(doc["results"])
    assert p.hits(p.search(SECRET)) == []
    p.check("insideword OR margin")  # and the daemon's index still equals --direct
