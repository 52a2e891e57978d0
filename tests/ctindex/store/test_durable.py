"""store/durable.py: the store's only two ways to write a file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctindex.errors import IndexWriteError
from ctindex.store.durable import atomic_write

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("sync", [True, False])
def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path: Path, sync: bool) -> None:
    target = tmp_path / "MANIFEST"
    target.write_bytes(b"old")
    atomic_write(target, b"new", sync=sync)
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MANIFEST"]


def test_a_failed_rename_is_one_error_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("x")  # a non-empty folder can not be renamed over
    with pytest.raises(IndexWriteError, match="cannot publish"):
        atomic_write(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


# What writes a file, spelled out: the store writes only through
# durable.write_new (new files) and durable.atomic_write (in-place).
_WRITERS = {"write_text", "write_bytes", "fdopen"}
_RENAMES = {"replace", "rename"}  # as os.replace / os.rename (str.replace is no write)


def _writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(getattr(func, "value", None), "id", "")
            if name in _WRITERS or (name in _RENAMES and owner == "os"):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {name}()")
            if name == "open" and any(
                isinstance(a, ast.Attribute) and a.attr in ("O_WRONLY", "O_RDWR")
                for a in ast.walk(node)
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} open() for writing")
    return found


def test_only_durable_writes_store_files() -> None:
    """Every file the store, the transaction and the build write goes through
    durable.py (the update lock file is opened for locking, never written)."""
    sources = [*sorted((REPO / "ctindex" / "store").glob("*.py"))]
    sources += sorted((REPO / "ctindex" / "indexing").glob("*.py"))
    bad = [
        w for path in sources if path.name not in ("durable.py", "lock.py") for w in _writes(path)
    ]
    assert not bad, "\n".join(bad)
