"""ctindex/policy/store_path.py: the store-folder walk, modes and the
wider-than-the-files warning (the commands' view: tests/e2e/test_robust_store_path.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctindex.errors import UnsafeStorePath
from ctindex.policy import store_path
from ctindex.reconciler import platform_features


@pytest.fixture(params=["dir_fd", "lstat"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both walks: descriptor-relative opens, and the lstat walk of
    platforms without them (the no-dir-fd simulation)."""
    if request.param == "lstat":
        monkeypatch.setattr(store_path, "has_dir_fd", lambda: False)
    elif not platform_features.has_dir_fd():
        pytest.skip("no dir_fd opens here")
    return str(request.param)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_check_store_makes_missing_folders_private(tmp_path: Path, walk: str) -> None:
    old = os.umask(0)
    try:
        store_path.check_store(tmp_path, create=3, index_mode=0o700)
    finally:
        os.umask(old)
    assert mode(tmp_path / ".ct") == 0o777  # the project store: an ordinary folder
    assert mode(tmp_path / ".ct" / "okf") == 0o700
    assert mode(tmp_path / ".ct" / "okf" / "runtime") == 0o700


def test_check_store_creates_nothing_unless_asked(tmp_path: Path, walk: str) -> None:
    store_path.check_store(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_check_store_refuses_a_link_dangling_or_not(tmp_path: Path, walk: str, depth: int) -> None:
    key = store_path.KEYS[depth]
    (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / key).symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafeStorePath, match=f"^{key} is a symbolic link; refusing"):
        store_path.check_store(tmp_path, create=3)
    assert not (tmp_path / "nowhere").exists()


def test_check_store_leaves_a_file_in_place_to_whoever_reads_it(tmp_path: Path, walk: str) -> None:
    """A runtime "folder" that is a file is not the store check's refusal:
    the runtime code reports it (docs/cli.md, "Refused store folders")."""
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    (tmp_path / ".ct" / "okf" / "runtime").write_text("")
    store_path.check_store(tmp_path, create=3)
    assert (tmp_path / ".ct" / "okf" / "runtime").is_file()


def test_shared_setting_is_asked_only_for_a_folder_of_another_user(tmp_path: Path) -> None:
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    asked: list[bool] = []
    store_path.check_store(tmp_path, lambda: asked.append(True) or False)
    assert asked == []


def test_file_mode_follows_the_folder(tmp_path: Path) -> None:
    for folder_mode, file_mode in ((0o700, 0o600), (0o2770, 0o660), (0o755, 0o644)):
        os.chmod(tmp_path, folder_mode)
        assert store_path.file_mode(tmp_path) == file_mode


def test_conform_files_tightens_only_regular_files(tmp_path: Path) -> None:
    folder = tmp_path / "okf"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)
    (folder / "seg").write_text("x")
    os.chmod(folder / "seg", 0o644)
    (folder / "runtime").mkdir(mode=0o700)
    (folder / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "outside").write_text("y")
    os.chmod(tmp_path / "outside", 0o644)
    assert store_path.conform_files(folder) == 1
    assert mode(folder / "seg") == 0o600
    assert mode(tmp_path / "outside") == 0o644  # a link is never followed


def test_wider_than_files_counts_the_folders_above_a_file(tmp_path: Path) -> None:
    """A 0644 file inside a 0700 folder is not readable by others: an index
    readable by everyone is wider than it."""
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    (tmp_path / "kb" / "closed").mkdir(parents=True)
    (tmp_path / "kb" / "open.md").write_text("a")
    (tmp_path / "kb" / "closed" / "b.md").write_text("b")
    for path, bits in (
        (tmp_path / "kb", 0o755),
        (tmp_path / "kb" / "closed", 0o700),
        (tmp_path / "kb" / "open.md", 0o644),
        (tmp_path / "kb" / "closed" / "b.md", 0o644),
    ):
        os.chmod(path, bits)
    keys = ["kb/open.md", "kb/closed/b.md"]
    os.chmod(tmp_path / ".ct" / "okf", 0o700)
    assert store_path.wider_than_files(tmp_path, lambda: keys) is None
    os.chmod(tmp_path / ".ct" / "okf", 0o755)
    assert store_path.wider_than_files(tmp_path, lambda: keys) == (
        ".ct/okf (mode 0755) lets everyone read the index, but 1 indexed file(s) are not "
        'readable to them ("kb/closed/b.md"); see docs/format.md, Modes'
    )


def test_wider_than_files_does_not_read_the_table_for_a_private_store(tmp_path: Path) -> None:
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    os.chmod(tmp_path / ".ct" / "okf", 0o700)

    def table() -> list[str]:
        raise AssertionError("the file table was read")

    assert store_path.wider_than_files(tmp_path, table) is None


# -- a project folder of another user (docs/format.md, "Store folders") --------

REFUSED = "refused: a project of another user"


def _theirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every project folder counts as another user's; returns the folders asked."""
    asked: list[str] = []

    def foreign(root: str, st: os.stat_result | None = None) -> str:
        asked.append(root)
        return REFUSED

    monkeypatch.setattr(store_path, "foreign_project", foreign)
    return asked


def test_a_writing_walk_in_a_project_of_another_user_makes_nothing(
    tmp_path: Path, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _theirs(monkeypatch)
    for create in (1, 2, 3):
        with pytest.raises(UnsafeStorePath, match=f"^{REFUSED}$"):
            store_path.check_store(tmp_path, create=create, index_mode=0o700)
    with pytest.raises(UnsafeStorePath, match=f"^{REFUSED}$"):
        store_path.check_store(tmp_path, write=True)
    assert list(tmp_path.iterdir()) == []
    # A store of ours left there (made before the rule): not written either,
    # not even tightened.
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    os.chmod(tmp_path / ".ct" / "okf", 0o755)
    with pytest.raises(UnsafeStorePath, match=f"^{REFUSED}$"):
        store_path.check_store(tmp_path, create=3, index_mode=0o700)
    assert not (tmp_path / ".ct" / "okf" / "runtime").exists()
    assert mode(tmp_path / ".ct" / "okf") == 0o755


def test_a_reading_walk_never_asks_whose_project_it_is(
    tmp_path: Path, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _theirs(monkeypatch)
    store_path.check_store(tmp_path)
    (tmp_path / ".ct" / "okf").mkdir(parents=True)
    store_path.check_store(tmp_path)
    assert asked == []


def test_a_group_shared_index_in_a_project_of_another_user_is_written(
    tmp_path: Path, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _theirs(monkeypatch)
    store_path.check_store(tmp_path, lambda: True, create=3)
    assert (tmp_path / ".ct" / "okf" / "runtime").is_dir()
    assert asked == [str(tmp_path)]  # once per walk


def test_a_refused_store_folder_is_named_before_the_project(
    tmp_path: Path, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folders that exist are checked first: a link (or a folder of
    another user) says so in its own line, as for a reading walk."""
    _theirs(monkeypatch)
    (tmp_path / ".ct").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafeStorePath, match=r"^\.ct is a symbolic link"):
        store_path.check_store(tmp_path, create=3)


def _stat_of(uid: int) -> os.stat_result:
    return os.stat_result((0o40755, 1, 1, 2, uid, 0, 4096, 0, 0, 0))


def test_foreign_project_names_the_owner_and_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pwd

    me = os.geteuid()
    assert store_path.foreign_project(tmp_path, _stat_of(me)) is None
    other = 1 if me != 1 else 2

    def named(uid: int) -> pwd.struct_passwd:
        return pwd.struct_passwd((f"user{uid}", "x", uid, uid, "", "/", "/bin/sh"))

    monkeypatch.setattr(pwd, "getpwuid", named)
    assert store_path.foreign_project(tmp_path, _stat_of(other)) == (
        f"{tmp_path} is owned by user{other} (uid {other}), not by user{me} (uid {me}): "
        "ctindex does not write into another user's project (run it as "
        f"user{other}, or search with --direct to read the files without an index: "
        "docs/format.md, Store folders)"
    )

    def unnamed(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", unnamed)
    assert store_path.foreign_project(tmp_path, _stat_of(other)) == (
        f"{tmp_path} is owned by uid {other}, not by uid {me}: ctindex does not write "
        "into another user's project (run it as the folder's owner, or search with "
        "--direct to read the files without an index: docs/format.md, Store folders)"
    )


def test_foreign_project_without_uids_is_never_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows (the no-getuid simulation): ownership is the folder's ACL."""
    monkeypatch.setattr(store_path, "has_getuid", lambda: False)
    assert store_path.foreign_project(tmp_path, _stat_of(os.geteuid() + 1)) is None
