"""Property test: after every random operation, full and narrowed diffs equal a naive oracle.

Two time models:
* ``real``: the real lstat and clock; a same-size edit restores the old mtime
  (only ctime and the racy rule can reveal it).
* ``coarse``: virtual time (every write stamps mtime = T, T advances by a
  drawn step) seen through a stat that rounds to 1 s or 2 s and has no ctime;
  a same-size edit in the same tick is invisible to the fingerprint, so only
  the racy-clean rule catches it -- deterministically.
"""

from __future__ import annotations

import os
import shutil
import stat as stat_mod
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex.reconciler import Manifest, ReconcileResult, reconcile
from tests.ctindex.reconciler.fakes import SimpleFilter, rounding_stat

SEC = 1_000_000_000
NAMES = ("a", "b", "c")
FLT = SimpleFilter(skip_dirs=frozenset({"c"}))  # folders named c are pruned, files named c kept
PATHS = (
    [f"{x}" for x in NAMES]
    + [f"{x}/{y}" for x in NAMES for y in NAMES]
    + [f"{x}/{y}/{z}" for x in NAMES for y in NAMES for z in NAMES]
)
KINDS = (
    "create",
    "modify",
    "rename",
    "delete",
    "mkdir",
    "rmdir",
    "chmod000",
    "to_symlink",
    "to_folder",
)

# (kind, a path to create at, which existing entry to act on, data, time step)
op_strategy = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(PATHS),
    st.integers(0, 10**6),
    st.binary(min_size=0, max_size=24),
    st.sampled_from([0, SEC // 4, SEC // 2, 3 * SEC // 2, 3 * SEC]),
)
Op = tuple[str, str, int, bytes, int]


@dataclass
class World:
    base: Path
    outside: Path
    coarse: bool
    t: int = 1_600_000_000 * SEC  # virtual time (coarse mode)

    def stamp(self, p: Path) -> None:
        if self.coarse:
            os.utime(p, ns=(self.t, self.t), follow_symlinks=False)

    def existing(self) -> list[str]:
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.base):
            rel = os.path.relpath(dirpath, self.base)
            out.extend(os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames)
        return sorted(out)

    def apply(self, kind: str, new_key: str, pick: int, data: bytes) -> list[str]:
        """Perform one operation if it makes sense now; return the keys it touched.

        Ops that need an existing entry act on existing()[pick]; others create new_key.
        """
        have = self.existing()
        old_key = have[pick % len(have)] if have else new_key
        if kind in ("create", "mkdir"):
            key, key2 = new_key, new_key
        else:
            key, key2 = old_key, new_key
        p, q = self.base / key, self.base / key2
        try:
            if kind == "create" and not os.path.lexists(p):
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
                self.stamp(p)
                return [key]
            if kind == "modify" and _is(p, stat_mod.S_ISREG):
                old = p.read_bytes()
                if not old:
                    return []
                before = os.lstat(p)
                with open(p, "r+b") as f:  # same inode, same size, new bytes
                    f.write(bytes((b + 1) % 256 for b in old))
                if self.coarse:
                    self.stamp(p)
                else:  # forge the old mtime back
                    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
                return [key]
            if (
                kind == "rename"
                and os.path.lexists(p)
                and not os.path.lexists(q)
                and _is(q.parent, stat_mod.S_ISDIR)
                and not (key2 + "/").startswith(key + "/")
            ):
                os.rename(p, q)
                return [key, key2]
            if kind == "delete" and (_is(p, stat_mod.S_ISREG) or _is(p, stat_mod.S_ISLNK)):
                p.unlink()
                return [key]
            if kind == "mkdir" and not os.path.lexists(p) and _is(p.parent, stat_mod.S_ISDIR):
                p.mkdir()
                return [key]
            if kind == "rmdir" and _is(p, stat_mod.S_ISDIR):
                _chmod_tree(p)
                shutil.rmtree(p)
                return [key]
            if kind == "chmod000" and os.path.lexists(p) and not _is(p, stat_mod.S_ISLNK):
                os.chmod(p, 0)
                return [key]
            if kind == "to_symlink" and _is(p, stat_mod.S_ISREG):
                p.unlink()
                os.symlink(self.outside if data[:1] < b"\x80" else self.outside / "f", p)
                return [key]
            if kind == "to_folder" and _is(p, stat_mod.S_ISREG):
                p.unlink()
                p.mkdir()
                (p / "a").write_bytes(data)
                self.stamp(p / "a")
                return [key]
        except (PermissionError, FileExistsError, NotADirectoryError):
            return []  # the op is impossible in this state (a parent is a file, mode 000, ...)
        return []


def _is(p: Path, test: Callable[[int], bool]) -> bool:
    try:
        return test(os.lstat(p).st_mode)
    except OSError:
        return False


def _chmod_tree(p: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(p):
        for n in dirnames + filenames:
            if not os.path.islink(os.path.join(dirpath, n)):
                os.chmod(os.path.join(dirpath, n), 0o755)
    os.chmod(p, 0o755)


def oracle(base: Path, prev: Manifest) -> dict[str, bytes]:
    """The truth, computed naively: read every accepted file in full.

    Where we may not look (EACCES, only as non-root), the previous knowledge stands.
    """
    truth: dict[str, bytes] = {}
    todo = [""]
    while todo:
        d = todo.pop()
        try:
            names = os.listdir(base / d if d else base)
        except PermissionError:
            truth.update({k: e.digest for k, e in prev.items() if k.startswith(d + "/") or k == d})
            continue
        for n in names:
            k = f"{d}/{n}" if d else n
            st = os.lstat(base / k)
            if stat_mod.S_ISDIR(st.st_mode) and FLT.descend(k):
                todo.append(k)
            elif stat_mod.S_ISREG(st.st_mode) and FLT.accept(k, st):
                try:
                    truth[k] = xxhash.xxh3_128_digest((base / k).read_bytes())
                except PermissionError:
                    if k in prev:
                        truth[k] = prev[k].digest
    return truth


def in_scope(key: str, scopes: list[str]) -> bool:
    return any(key == s or key.startswith(s + "/") for s in scopes)


def check(
    res: ReconcileResult, prev: Manifest, truth: dict[str, bytes], scopes: list[str] | None
) -> None:
    covered = (lambda k: True) if scopes is None else (lambda k: in_scope(k, scopes))
    t = {k: v for k, v in truth.items() if covered(k)}
    p = {k: e.digest for k, e in prev.items() if covered(k)}
    new = res.manifest
    assert new.sorted_keys() == sorted(new)  # a carried-over sorted list must stay exact
    assert {k: new[k].digest for k in new if covered(k)} == t
    if scopes is not None:  # everything outside the narrowed scope is carried over verbatim
        assert {k: new[k] for k in new if not covered(k)} == {
            k: e for k, e in prev.items() if not covered(k)
        }
    assert res.dirty == []
    assert set(res.added) | {n for _, n in res.renamed} == t.keys() - p.keys()
    assert set(res.removed) | {o for o, _ in res.renamed} == p.keys() - t.keys()
    assert len(res.renamed) == len({o for o, _ in res.renamed}) == len({n for _, n in res.renamed})
    both = t.keys() & p.keys()
    assert set(res.changed) == {k for k in both if t[k] != p[k]}
    assert set(res.metadata_only) <= {k for k in both if t[k] == p[k]}
    assert res.unchanged + len(res.metadata_only) + len(res.changed) == len(both)


def run_sequence(coarse: bool, step_ns: int, ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp, "base"), Path(tmp, "outside"), coarse)
        world.base.mkdir()
        world.outside.mkdir()
        (world.outside / "f").write_bytes(b"outside")
        stat = rounding_stat(step_ns, ctime_is_mtime=True) if coarse else os.lstat
        clock = (lambda: world.t) if coarse else None
        kw: dict[str, object] = {"stat": stat}
        if clock is not None:
            kw["clock_ns"] = clock
        manifest = Manifest()
        try:
            for kind, new_key, pick, data, dt in ops:
                world.t += dt
                touched = world.apply(kind, new_key, pick, data)
                truth = oracle(world.base, manifest)
                full = reconcile(world.base, FLT, manifest, **kw)  # type: ignore[arg-type]
                check(full, manifest, truth, None)
                if touched:
                    narrow = reconcile(world.base, FLT, manifest, only=touched, **kw)  # type: ignore[arg-type]
                    check(narrow, manifest, truth, touched)
                    for k in set(narrow.manifest) & set(full.manifest):
                        assert narrow.manifest[k].digest == full.manifest[k].digest
                    manifest = narrow.manifest
                else:
                    manifest = full.manifest
                world.t += SEC // 10  # the pass itself takes time
        finally:
            _chmod_tree(world.base)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(op_strategy, min_size=1, max_size=15))
def test_real_time_model(ops: list[Op]) -> None:
    run_sequence(False, 0, ops)


@SETTINGS
@given(st.sampled_from([SEC, 2 * SEC]), st.lists(op_strategy, min_size=1, max_size=15))
def test_coarse_timestamps_model(step_ns: int, ops: list[Op]) -> None:
    run_sequence(True, step_ns, ops)
