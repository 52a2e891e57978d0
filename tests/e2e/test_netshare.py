"""Indexed queries on a real network filesystem (docs/network-shares.md).

The project lives in the rig's export folder ("the server's disk",
tests/netshare.py); ctindex runs on the client side, through sshfs mounts
with ~1 ms added each way. Every answer is compared with tests/oracle.py run
on the server-side path, which shares no code with ctindex.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex.ipc.share_channel import NO_HOST
from tests import oracle
from tests.conftest import CORPUS
from tests.netshare import Rig, rig_for_test, unavailable

# On the sshfs rig: the slow tier (tests/conftest.py, TIERS).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
]

BUNDLE = "acme_retail"
REASON = "network filesystem fuse.sshfs: reconciled in "


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_for_test(tmp_path / "rig")


def _project(rig: Rig, watch: bool = True) -> Path:
    """A one-bundle project on the server's disk; returns its server-side path."""
    server = rig.export / "proj"
    shutil.copytree(CORPUS / BUNDLE, server / "okf" / "bundles" / BUNDLE)
    (server / ".git").mkdir()
    if not watch:
        (server / ".ct").mkdir()
        (server / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    return server


def _ctindex(rig: Rig, client: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    return rig.run(
        [sys.executable, "-m", "ctindex", "-C", str(client), *args], env=env, timeout=300
    )


def _search(rig: Rig, client: Path, word: str) -> tuple[int, dict[str, Any]]:
    done = _ctindex(rig, client, "--json", "search", "--limit", "1000", word)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def _agrees(rig: Rig, client: Path, server: Path, word: str) -> dict[str, Any]:
    code, doc = _search(rig, client, word)
    hits = {r["path"] for r in doc["results"]}
    assert hits == oracle.containing(server, word), (word, doc["freshness"])
    assert code == (0 if hits else 1)
    return doc


def _daemons(server: Path) -> list[str]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if "ctindex.daemon" in cmd:
            found.append(" ".join(cmd))
    return [c for c in found if "rig" in c and str(server.parent.parent) in c]


def _concept(server: Path, name: str) -> Path:
    return server / "okf" / "bundles" / BUNDLE / name


@pytest.mark.parametrize("watch", [True, False], ids=["watch-on", "watch-off"])
def test_share_server_side_create_edit_rename_delete_seen_by_next_search(
    net: Rig, watch: bool
) -> None:
    server = _project(net, watch)
    client = net.mount("host1") / "proj"
    doc = _agrees(net, client, server, "zqxv7share")
    if watch:
        assert doc["freshness"]["mode"] == "fallback"
        # No daemon on the share's host: said first, then the walk's cost.
        assert doc["freshness"]["reason"].startswith(NO_HOST), doc["freshness"]
        assert REASON in doc["freshness"]["reason"], doc["freshness"]
        # "reconciled in N ms" is the query's own walk, reported as it was.
        assert doc["freshness"]["reconcile_ms"] is not None
    else:
        assert doc["freshness"]["mode"] == "reconcile-on-query"
    note = _concept(server, "zz_share_note.md")
    note.write_text("# Share note\n\nzqxv7share on the server\n")  # create
    assert _agrees(net, client, server, "zqxv7share")["results"]
    note.write_text("# Share note\n\nnow zqxv7edited, a longer body than before\n")  # edit
    _agrees(net, client, server, "zqxv7share")
    assert _agrees(net, client, server, "zqxv7edited")["results"]
    moved = _concept(server, "zz_moved.md")
    os.rename(note, moved)  # rename
    doc = _agrees(net, client, server, "zqxv7edited")
    assert [r["path"] for r in doc["results"]] == [f"okf/bundles/{BUNDLE}/zz_moved.md"]
    moved.unlink()  # delete
    assert not _agrees(net, client, server, "zqxv7edited")["results"]
    # One walk per query and no daemon: none was started, none failed to start.
    assert _daemons(server) == []
    assert not (server / ".ct" / "okf" / "runtime" / "spawn.failed").exists()


def test_share_read_only_reader_answers_from_the_files(net: Rig) -> None:
    server = _project(net)
    writer = net.mount("host1") / "proj"
    _agrees(net, writer, server, "zqxv7ro")  # builds the index through a writable mount
    reader = net.mount("host2", read_only=True) / "proj"
    _concept(server, "zz_ro.md").write_text("# RO\n\nzqxv7ro behind the index\n")
    code, doc = _search(net, reader, "zqxv7ro")
    assert code == 0
    assert {r["path"] for r in doc["results"]} == oracle.containing(server, "zqxv7ro")
    assert doc["freshness"]["mode"] == "fallback"
    assert doc["freshness"]["reason"] == "read-only index: answered from the files"
    # Writing commands cannot honour their policy there: exit 2, one line.
    for command in ("update", "rebuild"):
        done = _ctindex(net, reader, command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    # Brought up to date through the writable mount, the index is still
    # "behind" as the read-only mount sees it: sshfs numbers inodes per mount,
    # so every file's fingerprint differs there (docs/network-shares.md,
    # "Remounts and other mounts"); it keeps answering from the files.
    _agrees(net, writer, server, "zqxv7ro")
    doc = _agrees(net, reader, server, "zqxv7ro")
    assert doc["freshness"]["reason"] == "read-only index: answered from the files"


def test_share_two_hosts_concurrent_writers(net: Rig) -> None:
    """Two mounts of one export stand in for two hosts. sshfs passes no
    locks to the server, so their update locks do not exclude each other:
    the store's own rules (unique file names, an atomic MANIFEST rename,
    lock-free readers, the grace period before collection) must keep every
    reader answering and the last writer's generation complete."""
    server = _project(net)
    hosts = [net.mount("host1") / "proj", net.mount("host2") / "proj"]
    _agrees(net, hosts[0], server, "zqxv7both")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}
    for round_ in range(4):
        _concept(server, f"zz_w{round_}.md").write_text(
            f"# W{round_}\n\nzqxv7both round {round_}\n"
        )
        if round_:
            _concept(server, f"zz_w{round_ - 1}.md").write_text(
                f"# W{round_ - 1}\n\nrewritten, zqxv7gone {round_}\n"
            )
        procs = [
            subprocess.Popen(
                [*net.nsenter(), sys.executable, "-m", "ctindex", "-C", str(h), *argv],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for h in hosts
            for argv in (["update"], ["--json", "search", "zqxv7both"])
        ]
        for proc in procs:
            _out, err = proc.communicate(timeout=300)
            assert proc.returncode in (0, 1), err
            assert "Traceback" not in err, err
        for host in hosts:  # settled: both hosts agree with the server's files
            _agrees(net, host, server, "zqxv7both")
            _agrees(net, host, server, "zqxv7gone")
    verify = _ctindex(net, hosts[1], "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_share_lock_owner_on_another_host(net: Rig) -> None:
    """host2 holds the index's update lock (a writer stopped mid-pass);
    host1 can neither see that process nor reach a socket of it. Its
    queries must still answer correctly, promptly, and start no daemon."""
    server = _project(net)
    host1, host2 = net.mount("host1") / "proj", net.mount("host2") / "proj"
    _agrees(net, host1, server, "zqxv7lock")
    lock = host2 / ".ct" / "okf" / "update.lock"
    holder = subprocess.Popen(
        [
            *net.nsenter(),
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            f"fh = open({str(lock)!r}, 'a')\n"
            "fcntl.flock(fh, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _concept(server, "zz_lock.md").write_text("# L\n\nzqxv7lock while host2 holds it\n")
        for _ in range(3):
            started = time.monotonic()
            doc = _agrees(net, host1, server, "zqxv7lock")
            assert doc["results"]
            # Bounded: either the lock is not shared across hosts (sshfs) and
            # the query indexes, or it is and the query answers from the files
            # after the documented 10 s wait; never the 60 s writer wait.
            assert time.monotonic() - started < 60, "hang guard"
            reason = doc["freshness"]["reason"]
            assert REASON in reason or reason == "index busy: answered from the files", reason
        assert _daemons(server) == []
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_share_remount_renumbers_inodes_without_reindexing(net: Rig) -> None:
    server = _project(net)
    client = net.mount("host1") / "proj"
    _agrees(net, client, server, "zqxv7mount")
    stat_before = net.run(
        [
            sys.executable,
            "-c",
            "import os,sys; st = os.lstat(sys.argv[1]); print(st.st_ino, st.st_dev)",
            str(client / "okf" / "bundles" / BUNDLE / "index.md"),
        ]
    ).stdout
    code, before = _search(net, client, "zqxv7mount")
    net.umount("host1")
    _concept(server, "zz_mount.md").write_text("# M\n\nzqxv7mount after the remount\n")
    net.mount("host1")
    stat_after = net.run(
        [
            sys.executable,
            "-c",
            "import os,sys; st = os.lstat(sys.argv[1]); print(st.st_ino, st.st_dev)",
            str(client / "okf" / "bundles" / BUNDLE / "index.md"),
        ]
    ).stdout
    assert stat_before != stat_after  # FUSE renumbered (inode and/or device)
    # sshfs keeps no ctime, so the walk compares size and mtime: the file
    # that changed is indexed, the others are not even re-read for their
    # new numbers (docs/network-shares.md, "Remounts and other mounts").
    _assert_only_the_new_file_is_read(net, client)
    doc = _agrees(net, client, server, "zqxv7mount")
    assert doc["results"]
    again = _agrees(net, client, server, "zqxv7mount")
    assert again["freshness"]["generation"] == doc["freshness"]["generation"]
    assert code == 1 and before["freshness"]["generation"] is not None


def _assert_only_the_new_file_is_read(net: Rig, client: Path) -> None:
    from ctindex.policy.netfs import BLIND_NOTE

    done = _ctindex(net, client, "--json", "update")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["added"], report["changed"], report["metadata_only"]) == (1, 0, 0), report
    assert BLIND_NOTE in report["notes"], report


def test_share_first_walk_after_the_host_indexed_reads_nothing_again(net: Rig) -> None:
    """The host indexed on its own disk (its inode and device numbers, its
    nanoseconds); a client with no host daemon to ask walks through sshfs,
    which shows none of those. Size and mtime to the second agree, so no
    file is read again; the one added meanwhile is."""
    server = _project(net)
    host = subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(server), "--json", "update"],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "CI"},
    )
    assert host.returncode == 0, host.stderr
    _concept(server, "zz_added.md").write_text("# Added\n\nzqxv7added on the host\n")
    time.sleep(2.1)  # past the racy window of the host's own record
    client = net.mount("host1") / "proj"
    _assert_only_the_new_file_is_read(net, client)
    _agrees(net, client, server, "zqxv7added")


def test_share_without_ctime_says_what_its_walk_cannot_see(net: Rig) -> None:
    """sshfs reports ctime = mtime. The probe finds that out (on the server's
    own disk ctime is kept); a same-size rewrite whose mtime is put back is
    then invisible to the client's walk, and its answer says exactly that
    instead of a plain "reconciled"; --direct reads the new text."""
    from ctindex.policy.netfs import NO_CTIME, UNSEEN

    server = _project(net)
    client = net.mount("host1") / "proj"
    probe = (
        "import sys; from ctindex.reconciler.ctime_probe import ctime_kept;"
        " print(ctime_kept(sys.argv[1]))"
    )
    done = net.run([sys.executable, "-c", probe, str(client)], check=True)
    assert done.stdout.strip() == "False", done
    done = subprocess.run(
        [sys.executable, "-c", probe, str(server)], check=True, capture_output=True, text=True
    )
    assert done.stdout.strip() == "True", done
    assert not [n for n in os.listdir(server) if n.startswith(".ctime-probe-")]
    note = _concept(server, "zz_same.md")
    note.write_text("# Same\n\nzqxv7before the rewrite\n")
    doc = _agrees(net, client, server, "zqxv7before")
    reason = doc["freshness"]["reason"]
    assert REASON in reason and f"{NO_CTIME}: {UNSEEN}" in reason, reason
    # Same size, other words, the old mtime put back (what cp -p, rsync -a
    # and tar -x do); on sshfs the whole fingerprint stays as it was.
    st = note.stat()
    time.sleep(1.1)  # whole seconds on sftp: a later second for the write itself
    note.write_text("# Same\n\nzqxv7after0 the rewrite\n")
    assert note.stat().st_size == st.st_size
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(2.5)  # past the racily-clean window, as a later query would be
    _code, doc = _search(net, client, "zqxv7after0")
    assert UNSEEN in doc["freshness"]["reason"], doc["freshness"]  # said, whatever it found
    direct = _ctindex(net, client, "--json", "search", "--direct", "zqxv7after0")
    assert [r["path"] for r in json.loads(direct.stdout)["results"]] == [
        f"okf/bundles/{BUNDLE}/zz_same.md"
    ]


def test_share_watch_start_on_a_client_refuses_at_once(net: Rig) -> None:
    """No daemon can vouch for a share from a client: `watch start` says so
    at once (it used to wait its whole start bound), and so does the
    foreground daemon a service manager would run."""
    _project(net)
    client = net.mount("host1") / "proj"
    for argv in (("watch", "start"), ("watch", "start", "--foreground")):
        started = time.monotonic()
        done = _ctindex(net, client, *argv)
        assert done.returncode == 1, (argv, done.stdout, done.stderr)
        assert time.monotonic() - started < 5  # Python's start and a mount table: not 10 s
        lines = (done.stdout + done.stderr).strip().splitlines()  # the summary, or the error
        assert len(lines) == 1 and "is on a network filesystem (fuse.sshfs at " in lines[0], lines
        assert "run `ctindex watch start` on the host where the folder is local" in lines[0]
