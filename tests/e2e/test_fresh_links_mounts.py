"""Changes no event announces (docs/reliability.md, "Changes no event announces").

* Hard links: a file rewritten in place through another of its names (a
  `cp -al` copy, a name outside the project) is seen by the next barrier.
* Mounts: a filesystem mounted (or unmounted) inside a scope after the daemon
  started is watched (or moved to the poll lane) before the next answer; a
  missed mount notification cannot produce a watcher-clean answer; `watch
  status` names the filesystem the daemon keeps busy.

Every search is compared with the independent oracle (tests/oracle.py), with
the daemon on and, for the same flows, off (reconcile on query).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex.client.daemon_requests import barrier, ping
from tests import oracle
from tests.daemon_support import (
    TEST_CONFIG,
    CliProject,
    FakeEngine,
    be_patient_for_acks,
    forked_daemon,
    journal,
    runtime_paths,
    wait_for,
)

METRICS = "acme_retail/metrics"


@pytest.fixture(autouse=True)
def _patient_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The searches here assert a live daemon's answer (watcher-clean); no
    test here stops a daemon to see it told apart."""
    be_patient_for_acks(monkeypatch)


def agrees(project: CliProject, word: str, mode: str) -> dict[str, Any]:
    """The indexed search for `word` equals the oracle, in freshness `mode`."""
    doc = project.search(word)
    assert doc["freshness"]["mode"] == mode, doc["freshness"]
    assert set(project.hits(doc)) == oracle.containing(project.root, word), word
    return doc


def rewrite_in_place(path: Path, old: str, new: str) -> None:
    """What vim does for a file with several links: same inode, new bytes."""
    with open(path, "r+", encoding="utf-8") as fh:
        text = fh.read().replace(old, new)
        fh.seek(0)
        fh.write(text)
        fh.truncate()


@pytest.fixture(params=["daemon", "no-daemon"])
def flow(
    request: pytest.FixtureRequest, make_cli_project: Callable[..., CliProject]
) -> tuple[CliProject, str]:
    """A project with the daemon on (searches must be watcher-clean) or with
    watch off (reconcile-on-query, which must already be right)."""
    if request.param == "daemon":
        project = make_cli_project()
        project.check("margin")  # starts the daemon (this one is a fallback)
        project.wait_daemon()
        return project, "watcher-clean"
    return make_cli_project(config={**TEST_CONFIG, "watch": False}), "reconcile-on-query"


# -- hard links --------------------------------------------------------------------


@pytest.mark.slow
def test_links_edit_through_a_cp_al_copy_inside_the_scope(flow: tuple[CliProject, str]) -> None:
    project, mode = flow
    metrics = project.root / METRICS
    (metrics / "linked.md").write_text("# Linked\n\nzqxv7before in the first name.\n")
    agrees(project, "zqxv7before", mode)
    subprocess.run(["cp", "-al", str(metrics), str(metrics) + "_copy"], check=True)
    assert set(project.hits(agrees(project, "zqxv7before", mode))) == {
        f"{METRICS}/linked.md",
        f"{METRICS}_copy/linked.md",
    }
    # Written through the copy's name: inotify reports only that name.
    rewrite_in_place(project.root / f"{METRICS}_copy/linked.md", "zqxv7before", "zqxv7after")
    assert set(project.hits(agrees(project, "zqxv7after", mode))) == {
        f"{METRICS}/linked.md",
        f"{METRICS}_copy/linked.md",
    }
    agrees(project, "zqxv7before", mode)


@pytest.mark.slow
def test_links_edit_through_a_name_outside_the_project(
    flow: tuple[CliProject, str], tmp_path: Path
) -> None:
    project, mode = flow
    target = project.root / METRICS / "shared.md"
    target.write_text("# Shared\n\nzqxv7outone is the word.\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(target, outside / "shared.md")  # a name no watcher sees
    agrees(project, "zqxv7outone", mode)
    # Same size, and the mtime put back (touch -r): only ctime tells.
    reference = tmp_path / "stamp"
    subprocess.run(["touch", "-r", str(target), str(reference)], check=True)
    rewrite_in_place(outside / "shared.md", "zqxv7outone", "zqxv7outtwo")
    subprocess.run(["touch", "-r", str(reference), str(outside / "shared.md")], check=True)
    assert project.hits(agrees(project, "zqxv7outtwo", mode)) == [f"{METRICS}/shared.md"]
    agrees(project, "zqxv7outone", mode)
    # The other name goes away: the file is tracked no longer, still right.
    (outside / "shared.md").unlink()
    rewrite_in_place(target, "zqxv7outtwo", "zqxv7outthree")
    agrees(project, "zqxv7outthree", mode)


def test_links_tracked_set_and_its_cost_are_reported(
    make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    project = make_cli_project()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for i in range(5):
        path = project.root / METRICS / f"l{i}.md"
        path.write_text(f"# L{i}\n\nzqxv7count{i}\n")
        os.link(path, outside / f"l{i}.md")
    project.check("margin")
    project.wait_daemon()
    agrees(project, "zqxv7count0", "watcher-clean")
    links = project.status()["unannounced"]["hard_links"]
    # Counted, not timed: exactly one lstat per tracked file per barrier.
    assert links["tracked"] == 5 and not links["over_cap"]
    assert links["last_check"]["files"] == 5 and links["stats"] == 5 * links["checks"]
    text = project.cli("watch", "status").stdout
    assert "5 files with several names re-checked per barrier" in text


# -- file watches: a name made after the daemon's pass ------------------------------


def same_size_rewrite_keeping_mtime(path: Path, old: str, new: str, tmp: Path) -> None:
    """Rewrite `path` in place (same size) and put its mtime back with
    `touch -r`: only ctime, and the file's own inotify watch, tell."""
    assert len(old) == len(new)
    reference = tmp / "mtime-reference"
    subprocess.run(["touch", "-r", str(path), str(reference)], check=True)
    rewrite_in_place(path, old, new)
    subprocess.run(["touch", "-r", str(reference), str(path)], check=True)


@pytest.mark.slow
def test_file_watch_sees_a_link_made_after_the_pass_outside_the_project(
    flow: tuple[CliProject, str], tmp_path: Path
) -> None:
    project, mode = flow
    target = project.root / METRICS / "late.md"
    target.write_text("# Late\n\nzqxv7lateone is the word.\n")
    agrees(project, "zqxv7lateone", mode)  # the pass sees one name (st_nlink 1)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(target, outside / "late.md")  # no folder watch sees this name
    same_size_rewrite_keeping_mtime(outside / "late.md", "zqxv7lateone", "zqxv7latetwo", tmp_path)
    assert project.hits(agrees(project, "zqxv7latetwo", mode)) == [f"{METRICS}/late.md"]
    agrees(project, "zqxv7lateone", mode)
    if mode == "watcher-clean":  # the link count change made the LinkTracker take it in
        assert project.status()["unannounced"]["hard_links"]["tracked"] == 1
    # Once more, now that the daemon knows the second name: still right.
    same_size_rewrite_keeping_mtime(outside / "late.md", "zqxv7latetwo", "zqxv7latee3e", tmp_path)
    agrees(project, "zqxv7latee3e", mode)
    agrees(project, "zqxv7latetwo", mode)


@pytest.mark.slow
def test_file_watch_follows_a_rename(flow: tuple[CliProject, str], tmp_path: Path) -> None:
    project, mode = flow
    first = project.root / METRICS / "before_rename.md"
    first.write_text("# Renamed\n\nzqxv7renone is the word.\n")
    agrees(project, "zqxv7renone", mode)
    moved = project.root / METRICS / "after_rename.md"
    subprocess.run(["mv", str(first), str(moved)], check=True)
    assert project.hits(agrees(project, "zqxv7renone", mode)) == [f"{METRICS}/after_rename.md"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(moved, outside / "x.md")
    same_size_rewrite_keeping_mtime(outside / "x.md", "zqxv7renone", "zqxv7rentwo", tmp_path)
    assert project.hits(agrees(project, "zqxv7rentwo", mode)) == [f"{METRICS}/after_rename.md"]
    agrees(project, "zqxv7renone", mode)
    if mode == "watcher-clean":
        files = project.status()["unannounced"]["file_watches"]
        assert files["available"] and not files["over_budget"]
        assert files["watched"] == len(indexed_keys(project))


def indexed_keys(project: CliProject) -> set[str]:
    return set(oracle.indexed_files(project.root))


@pytest.fixture()
def small_budget(
    make_cli_project: Callable[..., CliProject], monkeypatch: pytest.MonkeyPatch
) -> Iterator[CliProject]:
    """A daemon (the real engine, forked from this process) whose inotify
    backend may hold only 3 file watches: the rest of the files are over budget."""
    import ctindex.backends.inotify
    from ctindex.daemon.layers import RealEngine
    from ctindex.policy.project import Project

    monkeypatch.setattr(ctindex.backends.inotify, "FILE_WATCHES_MAX", 3)
    project = make_cli_project()
    with forked_daemon(project.root, lambda: RealEngine(Project.at(project.root))):
        project.wait_daemon()
        yield project


def test_file_watch_budget_exceeded_rechecks_the_rest(
    small_budget: CliProject, tmp_path: Path
) -> None:
    project = small_budget
    target = project.root / METRICS / "zz_over_budget.md"
    target.write_text("# Over\n\nzqxv7budone is the word.\n")
    agrees(project, "zqxv7budone", "watcher-clean")
    files = project.status()["unannounced"]["file_watches"]
    assert files["watched"] == files["budget"] == 3 and files["over_budget"]
    assert files["rechecked"] >= len(indexed_keys(project)) - 3
    checks_before = files["stats"]
    # Not watched (over budget): a second name and a same-size rewrite with
    # the mtime kept are caught by the per-barrier fingerprint check.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(target, outside / "o.md")
    same_size_rewrite_keeping_mtime(outside / "o.md", "zqxv7budone", "zqxv7budtwo", tmp_path)
    assert project.hits(agrees(project, "zqxv7budtwo", "watcher-clean")) == [
        f"{METRICS}/zz_over_budget.md"
    ]
    agrees(project, "zqxv7budone", "watcher-clean")
    files = project.status()["unannounced"]["file_watches"]
    # Counted, not timed: one lstat per unwatched file per barrier.
    assert files["stats"] - checks_before >= 2 * (len(indexed_keys(project)) - 3)
    text = project.cli("watch", "status").stdout
    assert "file_watches: 3 of 3, over budget" in text


@contextlib.contextmanager
def _no_file_watches(
    make_cli_project: Callable[..., CliProject],
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, Any] | None = None,
) -> Iterator[CliProject]:
    """A daemon (the real engine, forked) that may hold no file watch and
    re-check at most 2 unwatched files per barrier: every indexed file is
    past both, as at 156k files with the kernel's default watch limit."""
    import ctindex.backends.inotify
    import ctindex.daemon.filewatch
    from ctindex.daemon.layers import RealEngine
    from ctindex.policy.project import Project

    monkeypatch.setattr(ctindex.backends.inotify, "FILE_WATCHES_MAX", 0)
    monkeypatch.setattr(ctindex.daemon.filewatch, "REST_MAX", 2)
    project = make_cli_project(config=config)
    with forked_daemon(project.root, lambda: RealEngine(Project.at(project.root))):
        project.wait_daemon()
        yield project


def test_file_watch_budget_exceeded_past_the_recheck_cap_barriers_stay_narrowed(
    make_cli_project: Callable[..., CliProject], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No size alone makes every barrier a full pass: edits are folder
    events, each query's barrier narrowed to them, and `status` names what
    is left to the audit."""
    with _no_file_watches(make_cli_project, monkeypatch) as project:
        target = project.root / METRICS / "capped.md"
        reconciles = project.status()["reconciles"]
        for i, word in enumerate(("zqxv7capone", "zqxv7captwo", "zqxv7capsix")):
            target.write_text(f"# Capped {i}\n\n{word} is the word.\n")
            doc = agrees(project, word, "watcher-clean")
            assert "file-watches-over-budget" not in str(doc["freshness"]["reason"])
        assert project.status()["reconciles"] == reconciles  # narrowed passes only
        files = project.status()["unannounced"]["file_watches"]
        assert files["rechecked_over_cap"] and files["watched"] == 0
        assert files["unwatched"] >= len(indexed_keys(project)) - 1
        text = project.cli("watch", "status").stdout
        assert "unwatched (more than 2 to re-check per barrier)" in text, text
        assert "waits for the next one (the audit, every audit_seconds)" in text, text


def test_file_watch_budget_exceeded_past_the_recheck_cap_leaves_the_rest_to_the_audit(
    make_cli_project: Callable[..., CliProject], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The residual case (docs/reliability.md, "File watches" rule 4): a
    second name made outside the project after the last full pass and a
    same-size rewrite through it, mtime kept. No event says so; the next
    audit (every second here) finds it, and the answers then agree."""
    with _no_file_watches(make_cli_project, monkeypatch, {"audit_seconds": 1}) as project:
        target = project.root / METRICS / "capped.md"
        target.write_text("# Capped\n\nzqxv7capone is the word.\n")
        agrees(project, "zqxv7capone", "watcher-clean")
        audits = project.status()["reconciles"]
        os.link(target, tmp_path / "c.md")
        same_size_rewrite_keeping_mtime(tmp_path / "c.md", "zqxv7capone", "zqxv7captwo", tmp_path)
        # Bounded by the audit: two full passes after the rewrite (the first
        # may have started before it), then the index holds the new text.
        wait_for(lambda: project.status()["reconciles"] >= audits + 2, timeout=60, step=0.1)
        assert project.hits(agrees(project, "zqxv7captwo", "watcher-clean")) == [
            f"{METRICS}/capped.md"
        ]


def kernel_watches(fd: int) -> int:
    """Watches the kernel holds on an inotify fd (/proc/self/fdinfo)."""
    with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as fh:
        return sum(1 for line in fh if line.startswith("inotify wd:"))


def test_file_watches_do_not_leak_when_files_go(tmp_path: Path) -> None:
    from ctindex.backends.inotify import InotifyWatcher

    docs = tmp_path / "docs"
    docs.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    keys = []
    for i in range(40):
        (docs / f"f{i}.md").write_text(f"{i}\n")
        keys.append(f"docs/f{i}.md")
    os.link(docs / "f0.md", docs / "f0_again.md")  # two keys, one inode, one watch
    os.link(docs / "f1.md", outside / "f1.md")  # survives the unlink of its indexed name
    w = InotifyWatcher(tmp_path, ["docs"], lambda key: True)
    try:
        fd = w.fileno()
        assert fd is not None
        folders = kernel_watches(fd)
        assert w.watch_files([*keys, "docs/f0_again.md"]) == {*keys, "docs/f0_again.md"}
        assert w.file_watch_count() == 40 and kernel_watches(fd) == folders + 40
        for round_ in range(3):  # deleted and recreated: the count stays bounded
            for i in range(40):
                (docs / f"f{i}.md").unlink()
            (docs / "f0_again.md").unlink()
            batch = w.read(0.0)
            assert set(keys) <= batch.paths
            # The daemon drops keys its pass no longer records (f1's inode lives on
            # through its outside name, so no IN_IGNORED would ever drop it).
            w.unwatch_files([*keys, "docs/f0_again.md"])
            w.read(0.0)  # the IN_IGNORED of the removed watches
            assert w.file_watch_count() == 0 and not w.watched_files()
            assert kernel_watches(fd) == folders, round_
            for i in range(40):
                (docs / f"f{i}.md").write_text(f"{i} again\n")
            w.watch_files(keys)
            assert kernel_watches(fd) == folders + 40
            os.link(docs / "f0.md", docs / "f0_again.md")
            w.watch_files(["docs/f0_again.md"])
    finally:
        w.close()


def test_file_watch_follows_its_inode_and_is_re_pointed(tmp_path: Path) -> None:
    """Backend rules: one watch per inode, it follows a rename, a key whose
    name now holds another inode is re-pointed, IN_IGNORED drops it."""
    from ctindex.backends.inotify import InotifyWatcher

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a\n")
    other = tmp_path / "other.md"
    w = InotifyWatcher(tmp_path, ["docs"], lambda key: True)
    try:
        assert w.watch_files(["docs/a.md"]) == {"docs/a.md"}
        assert w.watch_files(["docs/a.md"]) == set()  # same inode: nothing new
        os.link(docs / "a.md", other)
        assert w.read(0.0).paths == {"docs/a.md"}  # IN_ATTRIB: the link count moved
        with open(other, "a") as fh:
            fh.write("through the other name\n")
        assert w.read(0.0).paths == {"docs/a.md"}  # no folder event; the file's own
        os.rename(docs / "a.md", docs / "b.md")
        assert {"docs/a.md", "docs/b.md"} <= w.read(0.0).paths
        assert w.watch_files(["docs/b.md"]) == {"docs/b.md"}
        w.unwatch_files(["docs/a.md"])  # what the pass no longer records
        assert w.file_watch_count() == 1 and set(w.watched_files()) == {"docs/b.md"}
        with open(other, "a") as fh:
            fh.write("again\n")
        assert w.read(0.0).paths == {"docs/b.md"}  # the watch moved with its inode
        # A new file under the same name: the key is re-pointed to it.
        (docs / "b.md.tmp").write_text("new\n")
        os.replace(docs / "b.md.tmp", docs / "b.md")
        w.read(0.0)
        assert w.watch_files(["docs/b.md"]) == {"docs/b.md"}
        with open(other, "a") as fh:
            fh.write("the old inode: not indexed any more\n")
        assert w.read(0.0).paths == set()
        (docs / "b.md").unlink()  # last name: IN_DELETE_SELF, IN_IGNORED
        assert "docs/b.md" in w.read(0.0).paths
        assert w.file_watch_count() == 0 and not w.watched_files()
    finally:
        w.close()


def test_file_watches_verify_rules(tmp_path: Path) -> None:
    """Watch first, or verify (docs/reliability.md, "File watches" rule 3)."""
    from ctindex.backends.inotify import InotifyWatcher
    from ctindex.daemon.filewatch import FileWatches
    from ctindex.reconciler import Fingerprint

    docs = tmp_path / "docs"
    docs.mkdir()

    def entry(name: str, recorded_after_ns: int = 3_000_000_000) -> tuple[Fingerprint, int]:
        st = os.lstat(docs / name)
        fp = Fingerprint(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        return fp, max(st.st_mtime_ns, st.st_ctime_ns) + recorded_after_ns

    for name in ("clean.md", "moved.md", "racy.md", "racy_linked.md", "late.md"):
        (docs / name).write_text(name)
    os.link(docs / "racy_linked.md", tmp_path / "other.md")
    seen = {f"docs/{n}": entry(n) for n in ("clean.md", "moved.md")}
    seen |= {f"docs/{n}": entry(n, 0) for n in ("racy.md", "racy_linked.md")}
    rewrite_in_place(docs / "moved.md", "moved", "MOVED")  # after the pass read it
    w = InotifyWatcher(tmp_path, ["docs"], lambda key: True, file_cap=4)
    files = FileWatches(os.fspath(tmp_path))
    try:
        assert w.file_budget == 4
        seen["docs/late.md"] = entry("late.md")  # the fifth: over the budget
        assert files.learn(w, seen, True, ()) == ["docs/moved.md"]
        # Racily clean with one name: trusted; with another name, or unwatched: re-checked.
        assert set(files.rest.entries) == {"docs/racy_linked.md", "docs/late.md"}
        assert files.verified == 4 and len(w.watched_files()) == 4
        # A narrowed pass's keys are watched before it reads them: nothing to verify.
        files.prewatch(w, ["docs/moved.md"])
        assert files.learn(w, {"docs/moved.md": entry("moved.md")}, False, ["docs/moved.md"]) == []
        assert files.verified == 4
        # Gone from what the pass records: unwatched, and the budget frees up.
        (docs / "clean.md").unlink()
        assert files.learn(w, {}, False, ["docs/clean.md"]) == []
        assert "docs/clean.md" not in w.watched_files()
        assert files.learn(w, {"docs/late.md": entry("late.md")}, False, ["docs/late.md"]) == []
        assert "docs/late.md" in w.watched_files() and "docs/late.md" not in files.rest.entries
        # No file-watching backend: nothing kept, nothing claimed.
        assert files.learn(None, seen, True, ()) == [] and not files.rest.entries
    finally:
        w.close()


def test_file_watches_skip_known_inodes_until_events_are_lost(tmp_path: Path) -> None:
    """A pass that recorded the inode a key is watched at costs no add_watch;
    a name holding another inode is re-pointed; after an overflow every key is
    re-added (an IN_IGNORED may have been among the lost events). Counted."""
    from ctindex.backends import inotify_c
    from ctindex.backends.inotify import InotifyWatcher

    class Counting(inotify_c.Libc):
        adds = 0

        def add_watch(self, fd: int, path: bytes, mask: int) -> int:
            if not mask & inotify_c.IN_ONLYDIR:  # file watches only
                Counting.adds += 1
            return super().add_watch(fd, path, mask)

    docs = tmp_path / "docs"
    docs.mkdir()
    keys = [f"docs/f{i}.md" for i in range(50)]
    for key in keys:
        (tmp_path / key).write_text("x\n")

    def inodes() -> dict[str, int]:
        return {k: os.lstat(tmp_path / k).st_ino for k in keys}

    w = InotifyWatcher(tmp_path, ["docs"], lambda key: True, binding=Counting())
    try:
        assert w.watch_files(keys, inodes()) == set(keys) and Counting.adds == 50
        assert w.watch_files(keys, inodes()) == set() and Counting.adds == 50
        (docs / "new.tmp").write_text("y\n")
        os.replace(docs / "new.tmp", docs / "f0.md")  # the name now holds another inode
        w.read(0.0)
        assert w.watch_files(keys, inodes()) == {"docs/f0.md"} and Counting.adds == 51
        with open("/proc/sys/fs/inotify/max_queued_events", encoding="ascii") as fh:
            queue = int(fh.read())
        for _ in range(queue // 4 + 100):  # 4 events per append: folder and file watch
            with open(docs / "f1.md", "a") as fh:
                fh.write("z")
        assert w.read(0.0).reason == "overflow"
        w.watch_files(keys, inodes())
        assert Counting.adds == 101
    finally:
        w.close()


def test_file_watch_budget_rule() -> None:
    from ctindex.backends.inotify import file_watch_budget

    assert file_watch_budget(8192, 100) == 4046  # half of what the folders leave
    assert file_watch_budget(1_000_000, 1000) == 65_536  # the fixed cap
    assert file_watch_budget(100, 500) == 0  # folders first


# -- mounts --------------------------------------------------------------------------


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} failed (needs root): {done.stderr.strip()}")


@contextlib.contextmanager
def mounted(*args: str) -> Iterator[Path]:
    mount(*args)
    point = Path(args[-1])
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.mark.slow
def test_mounts_bind_mount_inside_a_scope_is_watched(
    flow: tuple[CliProject, str], tmp_path: Path
) -> None:
    project, mode = flow
    point = project.root / METRICS / "mnt"
    point.mkdir()
    (point / "under.md").write_text("# Under\n\nzqxv7covered\n")
    agrees(project, "zqxv7covered", mode)
    source = tmp_path / "source"
    source.mkdir()
    (source / "there.md").write_text("# There\n\nzqxv7bound\n")
    with mounted("--bind", str(source), str(point)):
        assert agrees(project, "zqxv7bound", mode)["results"]
        agrees(project, "zqxv7covered", mode)  # hidden by the mount: gone
        # Written inside the mount after it was made: it must be watched now.
        (point / "new.md").write_text("# New\n\nzqxv7inmount\n")
        assert agrees(project, "zqxv7inmount", mode)["results"]
        (point / "new.md").write_text("# New\n\nzqxv7inmount2\n")
        agrees(project, "zqxv7inmount2", mode)
        agrees(project, "zqxv7inmount", mode)
        subprocess.run(["umount", str(point)], check=True)
        # Unmounted: the covered folder is back, and written to.
        agrees(project, "zqxv7bound", mode)
        assert agrees(project, "zqxv7covered", mode)["results"]
        (point / "after.md").write_text("# After\n\nzqxv7uncovered\n")
        assert agrees(project, "zqxv7uncovered", mode)["results"]


def test_mounts_tmpfs_inside_a_scope_is_watched(flow: tuple[CliProject, str]) -> None:
    project, mode = flow
    point = project.root / METRICS / "tmp"
    point.mkdir()
    with mounted("-t", "tmpfs", "none", str(point)):
        (point / "t.md").write_text("# T\n\nzqxv7tmpfs\n")
        assert agrees(project, "zqxv7tmpfs", mode)["results"]
        (point / "t.md").write_text("# T\n\nzqxv7tmpfs2\n")
        assert agrees(project, "zqxv7tmpfs2", mode)["results"]


def test_mounts_unreliable_mount_moves_the_daemon_to_the_poll_lane(
    make_cli_project: Callable[..., CliProject],
) -> None:
    project = make_cli_project()
    project.check("margin")
    project.wait_daemon()
    point = project.root / METRICS / "mq"
    point.mkdir()
    with mounted("-t", "mqueue", "none", str(point)):  # a type with no trusted events
        (project.root / METRICS / "poll.md").write_text("# P\n\nzqxv7pollane\n")
        doc = agrees(project, "zqxv7pollane", "fallback")
        assert doc["freshness"]["reason"].startswith("unreliable filesystem: mqueue"), doc
        assert project.status()["backend"] == "poll"
        subprocess.run(["umount", str(point)], check=True)
        (project.root / METRICS / "poll.md").write_text("# P\n\nzqxv7native\n")
        agrees(project, "zqxv7native", "watcher-clean")
        assert project.status()["backend"] == "inotify"


def test_mounts_missed_notification_is_caught_at_the_barrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No mount notification and no heartbeat: only the barrier's own check
    of the mount table can notice, and it must (a full pass, reason said)."""
    from ctindex.backends.mounts import MountTable
    from ctindex.daemon import schedule

    (tmp_path / "docs" / "sub").mkdir(parents=True)
    monkeypatch.setattr(MountTable, "fileno", lambda self: None)  # inherited by the fork
    monkeypatch.setattr(schedule, "HEARTBEAT_S", 3600.0)
    paths = runtime_paths(tmp_path)
    with forked_daemon(tmp_path, lambda: FakeEngine(tmp_path, tmp_path / "j")):
        wait_for(lambda: ping(paths))
        first = barrier(paths, "plan-1", 5000)
        assert not first.reconciled
        with mounted("-t", "tmpfs", "none", str(tmp_path / "docs" / "sub")):
            result = barrier(paths, "plan-1", 5000)
            assert result.reconciled and result.reconcile_reason == "mount-changed"
            assert [r["full"] for r in journal(tmp_path / "j")] == [True, True]
            again = barrier(paths, "plan-1", 5000)
            assert not again.reconciled
        assert barrier(paths, "plan-1", 5000).reconciled  # the unmount
        # A mount elsewhere on the machine is no reason for a full pass.
        other = tmp_path / "elsewhere"
        other.mkdir()
        with mounted("-t", "tmpfs", "none", str(other)):
            assert not barrier(paths, "plan-1", 5000).reconciled


def test_mounts_watch_status_names_the_filesystem_held_busy(
    make_cli_project: Callable[..., CliProject], tmp_path: Path
) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    with mounted("-t", "tmpfs", "none", str(fs)):
        project = make_cli_project(root=fs / "proj")
        project.check("margin")
        project.wait_daemon()
        text = project.cli("watch", "status").stdout
        assert f"holds {fs} (tmpfs) busy; `ctindex watch stop` releases it" in text
        busy = subprocess.run(["umount", str(fs)], capture_output=True, text=True, check=False)
        assert busy.returncode != 0 and "busy" in busy.stderr
        project.cli("watch", "stop")
        project.wait_gone()
        assert "busy" not in project.cli("watch", "status").stdout
        subprocess.run(["umount", str(fs)], check=True)


# -- the rules, unit by unit ---------------------------------------------------------


def test_links_tracker_rules(tmp_path: Path) -> None:
    from ctindex.daemon.links import LinkTracker
    from ctindex.reconciler import Fingerprint

    def entry(path: Path, recorded_after_ns: int = 3_000_000_000) -> tuple[Fingerprint, int]:
        st = os.lstat(path)
        fp = Fingerprint(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        return fp, max(st.st_mtime_ns, st.st_ctime_ns) + recorded_after_ns

    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text(name)
    links = LinkTracker(os.fspath(tmp_path), cap=2)
    assert not links.learn({"a.md": entry(tmp_path / "a.md")}, True, ())
    assert links.check() == []
    # A narrowed pass meeting an inode not tracked: its other names are unknown.
    assert links.learn({"b.md": entry(tmp_path / "b.md")}, False, ["b.md"])
    # The same inode again under a narrowed pass: known, no full pass needed.
    assert not links.learn({"b.md": entry(tmp_path / "b.md")}, False, ["b.md"])
    # Racily clean (recorded within the granularity of its stamps): not vouched for.
    links.learn({"a.md": entry(tmp_path / "a.md", 0)}, False, ["a.md"])
    assert links.check() == ["a.md"]
    # Gone, or changed in any fingerprint field (a same-size rewrite moves ctime).
    links.learn({"a.md": entry(tmp_path / "a.md")}, False, ["a.md"])
    (tmp_path / "b.md").unlink()
    assert sorted(links.check()) == ["b.md"]
    # A narrowed pass over a folder drops what it no longer reports below it.
    links.learn({}, False, [""])
    assert len(links) == 0
    # Above the cap nothing is kept and the daemon reconciles on every barrier.
    many = {n: entry(tmp_path / "c.md") for n in ("c.md", "c2.md", "c3.md")}
    links.learn(many, True, ())
    assert links.over_cap and len(links) == 0 and links.check() == []
    links.learn({"c.md": entry(tmp_path / "c.md")}, True, ())
    assert not links.over_cap and len(links) == 1


PROBE_SCRIPT = """
import select, subprocess, sys
from ctindex.backends.mounts import MountTable

point = sys.argv[1]
table = MountTable()
table.track([point])
assert not any(table.changed() for _ in range(20))
assert table.reads == 0, table.reads  # the kernel's counter vouched twenty times
subprocess.run(["mount", "-t", "tmpfs", "none", point], check=True)
if table._poll is not None:
    table._poll.poll(0)  # the selector's descriptor is consumed first: the probe must not care
assert table.changed() and table.reads == 1
assert not table.changed() and table.reads == 1
subprocess.run(["umount", point], check=True)
assert table.changed() and table.reads == 2
assert not table.changed(reread=True) and table.reads == 3  # the heartbeat reads regardless
print("ok")
"""


def test_mounts_probe_vouches_without_reading_and_misses_no_change(tmp_path: Path) -> None:
    """The barrier's mount check asks the kernel's change counter instead of
    reading the table; a mount or unmount must still show at once. In a
    private mount namespace, so mounts made elsewhere on the machine cannot
    make the table read."""
    (tmp_path / "point").mkdir()
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            PROBE_SCRIPT,
            str(tmp_path / "point"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"no private mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_mounts_relevant_lines_are_above_at_and_below_the_paths(tmp_path: Path) -> None:
    from ctindex.backends.mounts import MountTable, parse_mountinfo, relevant

    table = (
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        b"2 1 8:2 / /srv rw - ext4 /dev/sda2 rw\n"
        b"3 2 0:40 / /srv/proj/kb/mnt rw - tmpfs none rw\n"
        b"4 1 0:41 / /elsewhere rw - tmpfs none rw\n"
    )
    mounts = parse_mountinfo(table)
    got = [m.mount_id for m in relevant(["/srv/proj/kb"], mounts)]
    assert got == [2, 3]  # holding it (above), and below it; not elsewhere
    source = tmp_path / "mountinfo"
    source.write_bytes(table)
    watch = MountTable(os.fspath(source))
    watch.track(["/srv/proj/kb"])
    source.write_bytes(table.replace(b"4 1 0:41 / /elsewhere", b"5 1 0:42 / /elsewhere"))
    assert not watch.changed()  # another mount elsewhere: no change in scope
    # The same tmpfs unmounted and mounted again is another mount (new ID).
    source.write_bytes(table.replace(b"3 2 0:40", b"6 2 0:40"))
    assert watch.changed() and not watch.changed()
    source.unlink()
    assert watch.changed()  # unreadable differs from any readable table
    watch.close()
