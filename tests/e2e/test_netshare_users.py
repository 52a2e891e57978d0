"""A share a team uses (docs/network-shares.md, "A team on one share"):
two real users on the rig of tests/netshare.py. The project on the server
belongs to one of them and to the team's group, shares its index with the
group, and its share host daemon runs as its owner; the other member
mounts the share as itself (sftp logs in as that user) and queries. Every
answer is checked against tests/oracle.py on the server-side path."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import oracle, users
from tests.conftest import CORPUS
from tests.netshare import NO_CACHE, Rig, rig_for_test, unavailable
from tests.users import OtherUser

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
    pytest.mark.skipif(users.unavailable() is not None, reason=users.unavailable() or ""),
]

BUNDLE = "acme_retail"


@pytest.fixture
def team() -> Iterator[list[OtherUser]]:
    tag = os.getpid() % 100000
    try:
        with users.made_users([f"ctia{tag}", f"ctib{tag}"], f"ctit{tag}", login=True) as made:
            yield made
    except LookupError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def net() -> Iterator[Rig]:
    """The rig in a folder the team can enter (pytest's tmp_path is root's, 0700)."""
    work = Path(tempfile.mkdtemp(prefix="ctindex-team-"))
    os.chmod(work, 0o755)
    try:
        yield from rig_for_test(work / "rig")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _team_project(r: Rig, owner: OtherUser) -> Path:
    """The set-up of docs/network-shares.md: the owner's project, the team's
    group on every folder (setgid, so what anyone adds keeps it) and file."""
    os.chmod(r.export, 0o755)
    os.chmod(r.work, 0o755)
    server = r.export / "team"
    shutil.copytree(CORPUS / BUNDLE, server / "okf" / "bundles" / BUNDLE)
    (server / "okf" / "bundles" / BUNDLE / "zz_owner.md").write_text("# Owner\n\nzqxv7owner\n")
    (server / ".git").mkdir()
    (server / ".ct").mkdir()
    (server / ".ct" / "index.jsonc").write_text('{"version": 1, "share_index_with_group": true}')
    for folder, _dirs, files in os.walk(server):
        os.chown(folder, owner.uid, owner.gid)
        os.chmod(folder, 0o2770)
        for name in files:
            os.chown(os.path.join(folder, name), owner.uid, owner.gid)
            os.chmod(os.path.join(folder, name), 0o660)
    return server


def _query(r: Rig, user: OtherUser, client: Path, word: str) -> dict[str, Any]:
    done = r.run(user.argv(*user.console_argv(client, "--json", "search", "--limit", "1000", word)))
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_a_team_member_asks_the_owners_share_host_through_its_own_login(
    net: Rig, team: list[OtherUser]
) -> None:
    owner, member = team
    server = _team_project(net, owner)
    started = owner.console(server, "watch", "start")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        client = net.mount("member", user=member.name, options=(*NO_CACHE, "allow_other")) / "team"
        doc = _query(net, member, client, "zqxv7owner")
        assert {h["path"] for h in doc["results"]} == oracle.containing(server, "zqxv7owner")
        assert doc["results"]
        assert doc["freshness"]["mode"] == "watcher-clean", doc["freshness"]
        assert doc["freshness"]["reason"].startswith("share host "), doc["freshness"]
        # The member adds a concept through its mount: the file is the
        # member's, of the team's group (setgid); the owner's daemon
        # indexes it and vouches for it at the member's next query.
        page = client / "okf" / "bundles" / BUNDLE / "zz_member.md"
        write = ["sh", "-c", 'printf "# Member\\n\\nzqxv7team note\\n" > "$1"', "sh", str(page)]
        done = net.run(member.argv(*write))
        assert done.returncode == 0, done.stderr
        on_server = server / "okf" / "bundles" / BUNDLE / "zz_member.md"
        assert (on_server.stat().st_uid, on_server.stat().st_gid) == (member.uid, owner.gid)
        doc = _query(net, member, client, "zqxv7team")
        assert [h["path"] for h in doc["results"]] == [f"okf/bundles/{BUNDLE}/zz_member.md"]
        assert doc["freshness"]["mode"] == "watcher-clean", doc["freshness"]
        assert oracle.containing(server, "zqxv7team") == {f"okf/bundles/{BUNDLE}/zz_member.md"}
        # Every store file is the team's and no one else's.
        index = server / ".ct" / "okf"
        for folder, _dirs, files in os.walk(index):
            for path in [folder, *(os.path.join(folder, f) for f in files)]:
                st = os.lstat(path)
                assert st.st_gid == owner.gid, path
                assert not stat.S_IMODE(st.st_mode) & 0o007, (path, oct(st.st_mode))
    finally:
        owner.console(server, "watch", "stop")


def test_someone_outside_the_team_is_refused_in_one_line(net: Rig, team: list[OtherUser]) -> None:
    """A login that is not in the group cannot read the index: one line, no
    traceback, and nothing written into the team's project."""
    owner, member = team
    server = _team_project(net, owner)
    subprocess.run(["gpasswd", "-d", member.name, member.group], check=True, capture_output=True)
    client = net.mount("outsider", user=member.name, options=(*NO_CACHE, "allow_other")) / "team"
    done = net.run(member.argv(*member.console_argv(client, "--json", "search", "zqxv7owner")))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(os.listdir(server)) == [".ct", ".git", "okf"]
