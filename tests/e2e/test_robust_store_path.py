"""Robustness, security (docs/reliability.md, "Security"): the store path.

Every folder of the store path (`.ct`, `.ct/okf`, `.ct/okf/runtime`) is a
real folder of this user or nothing is read or written: a symbolic link in
the place of any of them is refused by every entry point with one line and
exit 2, and nothing is written anywhere (the link's target included). The
store is owner-only (0700/0600) unless the project shares it with a group;
`.ct/.gitignore` keeps the derived index out of git.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import users
from tests.conftest import write_config
from tests.daemon_support import wait_for
from tests.users import OtherUser

SECRET = "quokkasecretword"
REFUSED = "is a symbolic link; refusing to follow it"
COMPONENTS = (".ct", ".ct/okf", ".ct/okf/runtime")
# (arguments, whether the command needs `.ct` to hold the config already)
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("search", SECRET),
    ("--json", "search", SECRET),
    ("search", "--direct", SECRET),
    ("show", "a"),
    ("update",),
    ("rebuild",),
    ("verify",),
    ("status",),
    ("--json", "status"),
    ("watch", "start"),
    ("init", "--write"),
    ("scopes", "add", "more"),
)


def make_project(root: Path, *, watch: bool = False, **settings: Any) -> Path:
    """A project whose documents anyone may read, whatever umask an earlier
    test of this process left (an in-process daemon sets 077)."""
    (root / ".git").mkdir(parents=True)
    (root / "kb").mkdir()
    (root / "more").mkdir()
    (root / "kb" / "a.md").write_text(f"---\ntitle: A\n---\n# A\n\n{SECRET} in a.\n")
    write_config(root, "kb", watch=watch, **settings)
    for folder in (root, root / "kb", root / "more", root / ".ct"):
        os.chmod(folder, 0o755)
    for document in (root / "kb" / "a.md", root / ".ct" / "index.jsonc"):
        os.chmod(document, 0o644)
    return root


def tree(base: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below `base`: (mode, size, mtime_ns), links not followed."""
    found: dict[str, tuple[int, int, int]] = {}
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            found[str(path.relative_to(base))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def ctindex(root: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def link_component(root: Path, outside: Path, component: str) -> None:
    """Put a symbolic link to `outside` in the place of `component`; the
    folders above it are real (and `.ct` keeps the config when it is real)."""
    if component == ".ct":
        (root / ".ct" / "index.jsonc").rename(outside / "index.jsonc")
        (root / ".ct").rmdir()
    else:
        (root / component).parent.mkdir(parents=True, exist_ok=True)
    (root / component).symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.slow
def test_robust_store_path_symlinked_folder_refused_by_every_command(
    tmp_path: Path, component: str
) -> None:
    """Each command, with each store folder a link to an outside folder:
    exit 2, one line naming the folder, and not one byte written anywhere
    (the project, the link's target). Before the check, `update` wrote the
    whole index (MANIFEST, segments, update.lock) into the link's target."""
    root = make_project(tmp_path / "proj", watch=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    link_component(root, outside, component)
    before = tree(tmp_path)
    for args in COMMANDS:
        done = ctindex(root, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr == f"ctindex: {component} {REFUSED}{done.stderr.split(REFUSED)[1]}"
        assert done.stderr.count("\n") == 1, (args, done.stderr)
        assert SECRET not in done.stdout
        if "--json" in args:
            assert json.loads(done.stdout)["error"]["kind"] == "UnsafeStorePath"
        else:
            assert done.stdout == ""
        assert tree(tmp_path) == before, (args, set(tree(tmp_path)) ^ set(before))


@pytest.mark.parametrize("component", COMPONENTS)
def test_robust_store_path_symlinked_folder_refused_by_the_api_and_the_daemon(
    tmp_path: Path, component: str
) -> None:
    """ctindex.Index and the daemon process itself (as a client would start
    it): the API raises UnsafeStorePath, the daemon exits non-zero, and
    nothing is written, not even its cached start failure."""
    root = make_project(tmp_path / "proj", watch=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    link_component(root, outside, component)
    before = tree(tmp_path)
    probe = (
        "import sys, ctindex\n"
        "from ctindex import UnsafeStorePath\n"
        "index = ctindex.Index(sys.argv[1])\n"
        "for call in (lambda: index.search(sys.argv[2]), index.update, lambda: index.get('a')):\n"
        "    try:\n"
        "        call()\n"
        "    except UnsafeStorePath as exc:\n"
        "        print(exc)\n"
    )
    api = subprocess.run(
        [sys.executable, "-c", probe, str(root), SECRET],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert api.returncode == 0, api.stderr
    assert api.stdout.splitlines() == [api.stdout.splitlines()[0]] * 3
    assert api.stdout.startswith(f"{component} {REFUSED}")
    daemon = subprocess.run(
        [sys.executable, "-m", "ctindex.daemon", "--project", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert daemon.returncode != 0
    assert tree(tmp_path) == before


def test_robust_store_path_link_made_under_a_long_lived_index(tmp_path: Path) -> None:
    """ctindex.Index keeps its plan between queries: a link put in place of
    `.ct/okf` afterwards (here to the very index it was, moved away: a
    search would need to write nothing) is refused at the next query all
    the same, and nothing is read or written through it."""
    import ctindex

    root = make_project(tmp_path / "proj")
    moved = tmp_path / "moved"
    with ctindex.Index(root) as index:
        assert [h.path for h in index.search(SECRET).hits] == ["kb/a.md"]
        index.close()
        (root / ".ct" / "okf").rename(moved)
        (root / ".ct" / "okf").symlink_to(moved, target_is_directory=True)
        before = tree(moved)
        with pytest.raises(ctindex.UnsafeStorePath, match=f"^.ct/okf {REFUSED}"):
            index.search(SECRET)
    assert tree(moved) == before


def test_robust_store_path_owner_check(tmp_path: Path) -> None:
    """A store folder of another user is refused (exit 2, one line) unless
    the project shares its index with a group this user is in."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    root = make_project(tmp_path / "proj")
    assert ctindex(root, "update").returncode == 0
    os.chown(root / ".ct" / "okf", 65534, 65534)
    before = tree(tmp_path)
    done = ctindex(root, "update")
    assert done.returncode == 2
    assert done.stderr == (
        "ctindex: .ct/okf is owned by another user (uid 65534); refusing to use it "
        "(run ctindex as its owner, or share the index with a group: docs/format.md)\n"
    )
    assert tree(tmp_path) == before
    # Shared with a group of ours (root's group 0): accepted.
    os.chown(root / ".ct" / "okf", 65534, 0)
    write_config(root, "kb", watch=False, share_index_with_group=True)
    assert ctindex(root, "search", SECRET).returncode == 0


def test_robust_store_path_no_dir_fd_simulation_refuses_alike(tmp_path: Path) -> None:
    """Without descriptor-relative opens (Windows; CTINDEX_SIMULATE=no-dir-fd)
    the lstat walk refuses the same links with the same line."""
    root = make_project(tmp_path / "proj")
    outside = tmp_path / "outside"
    outside.mkdir()
    link_component(root, outside, ".ct/okf")
    env = {**os.environ, "CTINDEX_SIMULATE": "no-dir-fd"}
    before = tree(tmp_path)
    done = ctindex(root, "update", env=env)
    assert done.returncode == 2 and done.stderr.startswith(f"ctindex: .ct/okf {REFUSED}")
    assert tree(tmp_path) == before


# -- .ct/.gitignore -------------------------------------------------------------


def test_robust_store_path_gitignore_written_by_init_scopes_and_first_build(
    tmp_path: Path,
) -> None:
    from ctindex.policy.gitignore import GITIGNORE_TEXT

    made = []
    for how in ("init", "scopes", "build"):
        root = make_project(tmp_path / how)
        (root / ".ct" / "index.jsonc").unlink()
        if how == "init":
            assert ctindex(root, "init", "--write").returncode == 0
        elif how == "scopes":
            assert ctindex(root, "scopes", "add", "kb").returncode == 0
        else:
            write_config(root, "kb", watch=False)
            assert ctindex(root, "update").returncode == 0
        made.append((root / ".ct" / ".gitignore").read_text())
    assert made == [GITIGNORE_TEXT] * 3
    # git itself ignores the index then.
    root = tmp_path / "build"
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    ignored = subprocess.run(
        ["git", "-C", str(root), "check-ignore", ".ct/okf/MANIFEST"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ignored.stdout.strip() == ".ct/okf/MANIFEST"


def test_robust_store_path_gitignore_of_the_user_kept_and_opt_out(tmp_path: Path) -> None:
    mine = make_project(tmp_path / "mine")
    (mine / ".ct" / ".gitignore").write_text("# mine\n*.bak\n")
    assert ctindex(mine, "update").returncode == 0
    assert ctindex(mine, "scopes", "add", "more").returncode == 0
    assert (mine / ".ct" / ".gitignore").read_text() == "# mine\n*.bak\n"
    out = make_project(tmp_path / "out", gitignore_index=False)
    assert ctindex(out, "update").returncode == 0
    assert ctindex(out, "scopes", "add", "more").returncode == 0
    assert not (out / ".ct" / ".gitignore").exists()
    bad = make_project(tmp_path / "bad", gitignore_index="yes")
    done = ctindex(bad, "update")
    assert done.returncode == 2
    assert done.stderr.endswith(": gitignore_index: must be true or false, not a string\n")


# -- modes ----------------------------------------------------------------------


def store_modes(root: Path) -> dict[str, int]:
    """Permission bits of every entry of `.ct/okf` (and the folder itself)."""
    okf = root / ".ct" / "okf"
    found = {".": stat.S_IMODE(okf.lstat().st_mode)}
    for key, (mode, _size, _mtime) in tree(okf).items():
        found[key] = stat.S_IMODE(mode)
    return found


@pytest.mark.needs("peercred")  # a daemon's own publish
def test_robust_store_path_modes_after_build_update_rebuild_and_daemon_publish(
    tmp_path: Path,
) -> None:
    """Whatever wrote it (a build, an update, a rebuild, the daemon's own
    publish), the store is 0700 folders and 0600 files, also under a
    permissive umask; an index a wider older version left is tightened."""
    root = make_project(tmp_path / "proj", watch=True)
    old = os.umask(0)
    try:
        assert ctindex(root, "update").returncode == 0
        (root / "kb" / "b.md").write_text("# B\n\nsecond file\n")
        assert ctindex(root, "update").returncode == 0
        assert ctindex(root, "rebuild").returncode == 0
        assert ctindex(root, "watch", "start").returncode == 0
        generation = json.loads(ctindex(root, "--json", "status").stdout)["generation"]
        (root / "kb" / "c.md").write_text("# C\n\nthird file\n")
        found = wait_for(lambda: _answered_by_daemon(root, "third"), timeout=30)
        assert found["freshness"]["generation"] > generation  # the daemon published
    finally:
        os.umask(old)
        ctindex(root, "watch", "stop")
    modes = store_modes(root)
    assert {k for k in modes if k.startswith("seg-")}, modes
    assert "runtime/daemon.lock" in modes
    wrong = {k: oct(m) for k, m in modes.items() if m != (0o700 if _is_dir(root, k) else 0o600)}
    assert wrong == {}
    # An index an older version made world-readable: tightened by the next pass.
    okf = root / ".ct" / "okf"
    os.chmod(okf, 0o755)
    for name in os.listdir(okf):
        if (okf / name).is_file():
            os.chmod(okf / name, 0o644)
    write_config(root, "kb", watch=False)
    assert ctindex(root, "update").returncode == 0
    assert {k: m for k, m in store_modes(root).items() if "/" not in k} == {
        # folders: the index itself, runtime/, the share host's barrier/
        k: 0o700 if k == "." or _is_dir(root, k) else 0o600
        for k in store_modes(root)
        if "/" not in k
    }


def _answered_by_daemon(root: Path, word: str) -> dict[str, Any] | None:
    doc: dict[str, Any] = json.loads(ctindex(root, "--json", "search", word).stdout)
    return doc if doc["freshness"]["mode"] == "watcher-clean" and doc["total"] == 1 else None


def _is_dir(root: Path, key: str) -> bool:
    return (root / ".ct" / "okf" / key).is_dir() and not (root / ".ct" / "okf" / key).is_symlink()


def test_robust_store_path_status_and_verify_warn_when_store_is_wider(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    assert ctindex(root, "update").returncode == 0
    os.chmod(root / "kb" / "a.md", 0o600)
    quiet = json.loads(ctindex(root, "--json", "status").stdout)
    assert quiet["store_mode_warning"] is None
    os.chmod(root / ".ct" / "okf", 0o755)
    status = ctindex(root, "--json", "status")
    warning = json.loads(status.stdout)["store_mode_warning"]
    assert warning == (
        ".ct/okf (mode 0755) lets everyone read the index, but 1 indexed file(s) are not "
        'readable to them ("kb/a.md"); see docs/format.md, Modes'
    )
    assert f"warning: {warning}\n" in ctindex(root, "status").stdout
    assert json.loads(ctindex(root, "--json", "verify").stdout)["store_mode_warning"] == warning
    assert f"warning  {warning}\n" in ctindex(root, "verify").stdout
    os.chmod(root / "kb" / "a.md", 0o644)
    assert json.loads(ctindex(root, "--json", "status").stdout)["store_mode_warning"] is None


@pytest.fixture
def other_user() -> Iterator[OtherUser]:
    why = users.unavailable()
    if why:
        pytest.skip(why)
    name = f"ctix{os.getpid() % 100000}"
    try:
        with users.made_users([name], f"{name}g") as made:
            yield made[0]
    except LookupError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def shared_tmp() -> Any:
    """A folder another user can enter (pytest's tmp_path is root's, 0700)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ctindex-users-"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _users_project(root: Path, **settings: Any) -> Path:
    make_project(root, **settings)
    os.chmod(root / "kb" / "a.md", 0o600)  # only its owner may read it
    (root / "kb" / "b.md").write_text("# B\n\npublicword for everyone.\n")
    os.chmod(root / "kb" / "b.md", 0o644)
    return root


def test_robust_store_path_other_user_cannot_read_a_private_document_through_the_index(
    other_user: OtherUser, shared_tmp: Path
) -> None:
    """A 0600 document in a 0755 project, indexed by its owner: another
    user cannot open the store (0700/0600), and `ctindex search` as that
    user refuses the store in one line instead of serving the text. Before,
    the store was 0755/0644 and the search answered with the document."""
    root = _users_project(shared_tmp / "proj")
    assert ctindex(root, "update").returncode == 0
    assert other_user.run("cat", str(root / "kb" / "a.md")).returncode != 0  # the premise
    done = other_user.ctindex(root, "search", SECRET)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == (
        "ctindex: .ct is owned by another user (uid 0); refusing to use it "
        "(run ctindex as its owner, or share the index with a group: docs/format.md)\n"
    )
    assert SECRET not in done.stdout + done.stderr
    # Nor around ctindex: the store's files cannot be opened.
    assert other_user.run("cat", str(root / ".ct" / "okf" / "MANIFEST")).returncode != 0
    grep = other_user.run("grep", "-rl", SECRET, str(root / ".ct"))
    assert grep.stdout == ""


def test_robust_store_path_group_shared_index_serves_the_group_as_documented(
    other_user: OtherUser, shared_tmp: Path
) -> None:
    """With `"share_index_with_group": true` the index takes the group of
    `.ct` (2770/0660): a member searches it, and the 0600 document's text is
    part of what the project chose to share: `status` says so."""
    root = _users_project(shared_tmp / "proj", share_index_with_group=True)
    os.chown(root / ".ct", 0, other_user.gid)
    assert ctindex(root, "update").returncode == 0
    okf = root / ".ct" / "okf"
    assert (stat.S_IMODE(okf.stat().st_mode), okf.stat().st_gid) == (0o2770, other_user.gid)
    files = [okf / n for n in os.listdir(okf) if (okf / n).is_file()]
    assert {(stat.S_IMODE(f.stat().st_mode), f.stat().st_gid) for f in files} == {
        (0o660, other_user.gid)
    }
    public = other_user.ctindex(root, "--json", "search", "publicword")
    assert public.returncode == 0, public.stderr
    assert [r["path"] for r in json.loads(public.stdout)["results"]] == ["kb/b.md"]
    shared = other_user.ctindex(root, "--json", "search", SECRET)
    assert [r["path"] for r in json.loads(shared.stdout)["results"]] == ["kb/a.md"]
    status = json.loads(ctindex(root, "--json", "status").stdout)
    assert status["store_mode_warning"] == (
        f".ct/okf (mode 2770) lets group {other_user.gid} read the index, but 1 indexed "
        'file(s) are not readable to them ("kb/a.md"); see docs/format.md, Modes'
    )
    # Without the setting the same project is refused to the member.
    write_config(root, "kb", watch=False)
    os.chmod(root / ".ct" / "index.jsonc", 0o644)
    refused = other_user.ctindex(root, "search", "publicword")
    assert refused.returncode == 2 and "owned by another user" in refused.stderr


# -- a project folder of another user (docs/format.md, "Store folders") ---------

# Commands that write under `.ct` or may start a daemon: refused in a project
# folder of another user. The others read, and answer as ever.
WRITERS: tuple[tuple[str, ...], ...] = (
    ("search", SECRET),
    ("--json", "search", SECRET),
    ("search", "--paths", SECRET),
    ("show", "a"),
    ("update",),
    ("rebuild",),
    ("verify", "--repair"),
    ("init", "--write"),
    ("scopes", "add", "more"),
    ("watch", "start"),
    ("mcp",),
)
READERS: tuple[tuple[str, ...], ...] = (
    ("search", "--direct", SECRET),
    ("status",),
    ("why", "kb/a.md"),
    ("scopes",),
    ("init",),
    ("verify",),
    ("watch", "status"),
    ("watch", "stop"),
)


def not_yours(root: Path, owner: str, owner_uid: int, me: str, my_uid: int) -> str:
    return (
        f"ctindex: {root} is owned by {owner} (uid {owner_uid}), not by {me} (uid {my_uid}): "
        f"ctindex does not write into another user's project (run it as {owner}, or search "
        "with --direct to read the files without an index: docs/format.md, Store folders)\n"
    )


def bare_project(root: Path) -> Path:
    """A git checkout with an OKF root and no `.ct`: its scopes are derived,
    and the first indexing command would make `.ct` (docs/cli.md, "Project")."""
    (root / ".git").mkdir(parents=True)
    (root / "kb").mkdir()
    (root / "more").mkdir()
    (root / "kb" / "index.md").write_text("# KB\n")
    (root / "kb" / "a.md").write_text(f"---\ntitle: A\n---\n# A\n\n{SECRET} in a.\n")
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return root


def give(root: Path, uid: int, gid: int) -> None:
    for folder, dirs, files in os.walk(root):
        os.chown(folder, uid, gid)
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def daemons_of(root: Path) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "ctindex.daemon" in cmd and str(root) in cmd:
            found.append(proc.pid)
    return found


@pytest.mark.slow
def test_root_writes_nothing_into_a_users_project_and_the_user_indexes_it(
    other_user: OtherUser, shared_tmp: Path
) -> None:
    """Root in a user's checkout without `.ct`: every command that would
    write is refused with one line naming the owner (exit 2), and nothing is
    made, no daemon started: by the CLI, ctindex.Index, the daemon started
    by hand. Before, `search` made a root-owned `.ct/okf` and a root daemon,
    and the owner was refused every command after. The owner then indexes
    and watches it as ever; root is refused that store (another user's), by
    the full CLI and by the query fast path alike, while its daemon runs."""
    import pwd

    root = bare_project(shared_tmp / "proj")
    give(root, other_user.uid, other_user.gid)
    before = tree(root)
    me = pwd.getpwuid(0).pw_name
    refusal = not_yours(root, other_user.name, other_user.uid, me, 0)
    for args in WRITERS:
        done = ctindex(root, *args)
        assert (done.returncode, done.stderr) == (2, refusal), (args, done.stdout)
        if "--json" in args:
            assert json.loads(done.stdout)["error"]["kind"] == "UnsafeStorePath"
        else:
            assert done.stdout == "", args
        assert tree(root) == before, (args, set(tree(root)) ^ set(before))
    for args in READERS:
        done = ctindex(root, *args)
        assert done.returncode in (0, 1, 2, 3) and "Traceback" not in done.stderr, (args, done)
        assert tree(root) == before, (args, set(tree(root)) ^ set(before))
    direct = ctindex(root, "--json", "search", "--direct", SECRET)
    assert [r["path"] for r in json.loads(direct.stdout)["results"]] == ["kb/a.md"]
    probe = (
        "import sys, ctindex\n"
        "index = ctindex.Index(sys.argv[1])\n"
        "for call in (lambda: index.search(sys.argv[2]), index.update, index.ids):\n"
        "    try:\n"
        "        call()\n"
        "    except ctindex.UnsafeStorePath as exc:\n"
        "        print(exc)\n"
        "print(len(index.search(sys.argv[2], direct=True).hits))\n"
    )
    api = subprocess.run(
        [sys.executable, "-c", probe, str(root), SECRET],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert api.stdout.splitlines() == [refusal.removeprefix("ctindex: ").rstrip()] * 3 + ["1"]
    daemon = subprocess.run(
        [sys.executable, "-m", "ctindex.daemon", "--project", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert daemon.returncode != 0
    assert tree(root) == before
    assert daemons_of(root) == []

    # The owner: its own `.ct`, its own daemon.
    built = other_user.console(root, "update")
    assert built.returncode == 0, built.stderr
    for key in (".ct", ".ct/okf"):
        assert (root / key).stat().st_uid == other_user.uid, key
    found = other_user.console(root, "--json", "search", SECRET)
    assert found.returncode == 0, found.stderr
    assert [r["path"] for r in json.loads(found.stdout)["results"]] == ["kb/a.md"]
    from ctindex.ipc.peer import no_peer_check

    watched = no_peer_check() is None
    if watched:
        started = other_user.console(root, "watch", "start")
        assert started.returncode == 0, started.stderr
        assert wait_for(lambda: other_user.console(root, "watch", "status").returncode == 0, 60)
        assert (root / ".ct" / "okf" / "runtime").stat().st_uid == other_user.uid
    try:
        # Root meets a store of another user now: the existing refusal, and
        # the daemon's fast path does not answer root either.
        again = ctindex(root, "search", SECRET)
        assert again.returncode == 2, again.stdout
        assert again.stderr == (
            f"ctindex: .ct is owned by another user (uid {other_user.uid}); refusing to use it "
            "(run ctindex as its owner, or share the index with a group: docs/format.md)\n"
        )
    finally:
        if watched:
            assert other_user.console(root, "watch", "stop").returncode == 0
    assert wait_for(lambda: daemons_of(root) == [], 30)


def test_a_user_writes_nothing_into_a_folder_of_root(
    other_user: OtherUser, shared_tmp: Path
) -> None:
    """The other way round: a user in a checkout of root's (readable to all)
    gets the same refusal naming root, and nothing made; `--direct` reads."""
    root = bare_project(shared_tmp / "proj")
    before = tree(root)
    refusal = not_yours(root, "root", 0, other_user.name, other_user.uid)
    for args in (("search", SECRET), ("update",), ("init", "--write"), ("watch", "start")):
        done = other_user.console(root, *args)
        assert (done.returncode, done.stderr) == (2, refusal), (args, done.stdout)
    direct = other_user.console(root, "--json", "search", "--direct", SECRET)
    assert direct.returncode == 0, direct.stderr
    assert [r["path"] for r in json.loads(direct.stdout)["results"]] == ["kb/a.md"]
    assert tree(root) == before
    assert daemons_of(root) == []


def test_a_group_member_searches_a_shared_index_in_a_folder_of_root_without_a_daemon(
    other_user: OtherUser, shared_tmp: Path
) -> None:
    """An index shared with a group on purpose is the exception: a member
    searches it in root's folder (and brings it up to date), with `watch`
    on, but starts no daemon there and writes no failure record for one."""
    root = _users_project(shared_tmp / "proj", watch=True, share_index_with_group=True)
    os.chown(root / ".ct", 0, other_user.gid)
    assert ctindex(root, "update").returncode == 0
    (root / "kb" / "c.md").write_text("# C\n\npublicword again.\n")
    os.chmod(root / "kb" / "c.md", 0o644)
    done = other_user.console(root, "--json", "search", "publicword")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert sorted(r["path"] for r in answer["results"]) == ["kb/b.md", "kb/c.md"]
    assert "project folder of another user: no daemon started" in answer["freshness"]["reason"]
    assert not (root / ".ct" / "okf" / "runtime").exists()
    assert daemons_of(root) == []


def test_roots_store_left_in_a_folder_now_of_another_user_is_not_written(
    tmp_path: Path,
) -> None:
    """A `.ct` root made before this rule (or the folder given away since):
    root's own store, in another user's project folder, is not written
    either; reading commands and `watch stop` still run."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    import pwd

    root = make_project(tmp_path / "proj")
    assert ctindex(root, "update").returncode == 0
    (root / "kb" / "b.md").write_text("# B\n\nchanged since\n")
    os.chown(root, 65534, 65534)
    before = tree(root)
    owner = pwd.getpwuid(65534).pw_name
    for args in (("search", SECRET), ("update",), ("scopes", "add", "more")):
        done = ctindex(root, *args)
        assert (done.returncode, done.stderr) == (2, not_yours(root, owner, 65534, "root", 0))
    for args in (("status",), ("watch", "stop"), ("search", "--direct", SECRET)):
        done = ctindex(root, *args)
        assert done.returncode == 0, (args, done.stderr)
    assert tree(root) == before
