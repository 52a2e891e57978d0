"""Differential soak: random file operations and daemon abuse, checked against
the independent oracle `tests/oracle.py` (docs/reliability.md, "Soak").

    python -m tests.soak_harness --ops 3000 [--seed N] [--check-every K]
        [--only KIND,...] [--weight KIND=W] [--time-box S] [--keep-going]

The project holds a git-managed scope `kb/` (two branches) and a release area
`okf/bundles/<name>/` (bundles with an `index.md`), under one of four
`.ct/index.jsonc` variants (derived or explicit scopes, with or without an
exclude). Each step applies 1 to 2K-1 random file operations (`--ops` counts
these, not steps), sometimes abuses the daemon (SIGKILL, SIGSTOP/SIGCONT, an
event-queue overflow while stopped, damaged runtime or index files, a
concurrent `update`/`rebuild`), then checks:

* every marker-word query (`search --json`, daemon on) returns exactly the
  paths `oracle.containing()` names: the oracle walks the files with its own
  rules and shares no code with ctindex, so a stale answer that `--direct`
  would share (both read the same cached plan) is caught. A divergence is a
  failure whatever the answer's freshness says (nothing may be stale);
* one query of the full language (OR, prefix, negation, filters) equals
  `--direct` (`--direct-every`);
* freshness is truthful: never `watcher-clean` while every daemon is
  SIGSTOPped, `fallback` right after a SIGKILL, `watcher-clean` only with a
  barrier time and a generation, no mode other than those two;
* every query answers within a hang guard (`--hang-guard`, SIGALRM; a hard
  faulthandler exit if even that cannot interrupt it).

The seed is printed first; the same seed replays the same operations (the
daemon's timing is not replayed, so a failure may need a few runs). Searches
run in-process (`ctindex.cli.main`) to keep steps cheap; the daemon is the
real detached process a search spawns.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests import oracle

SCOPE = "kb"
BUNDLES = "okf/bundles"
VOCAB_SIZE = 120
# Marker words: no stemmer changes them (a digit and an 'x' end every one) and
# no file or folder name contains one (a document without a title is titled by
# its file name, which the oracle does not read).
COMMON = "zqcommon7x"  # in every generated document
HUGE = "zqhuge7x"  # repeated 110k-190k times in a huge document
MARKER_RE = re.compile(rb"zq[a-z]+[0-9]x")
FIXED_MTIME = 1_600_000_000  # the stamp of every tar/rsync "release"
CONFIG_BYTES = 1024  # every config variant is padded to this size
MAX_FILES = 400  # above this, creating operations turn into deletes
MAX_MOUNTS = 3
MAX_HUGE = 2
SETTINGS = {
    "version": 1,
    "watch": True,
    "debounce_ms": 20,
    "barrier_timeout_ms": 1000,
    "idle_seconds": 120,
    "audit_seconds": 30,
}
_PROVIDER = "okf-markdown"
# The config variants a same-stamp swap moves between (all CONFIG_BYTES long):
# derived scopes (kb/ and each okf/bundles/<name>/), explicit scopes, and each
# with an exclude that drops files the others index.
CONFIGS: dict[str, dict[str, Any]] = {
    "derived": dict(SETTINGS),
    "derived-exclude": {
        **SETTINGS,
        "exclude": [*oracle.DEFAULT_EXCLUDE, "kb/d1/**", "okf/bundles/b1/**"],
    },
    "explicit": {
        **SETTINGS,
        "scopes": [{"root": SCOPE, "provider": _PROVIDER}, {"root": "okf", "provider": _PROVIDER}],
    },
    "explicit-exclude": {
        **SETTINGS,
        "scopes": [
            {"root": SCOPE, "provider": _PROVIDER, "exclude": ["d2/**"]},
            {"root": "okf", "provider": _PROVIDER, "exclude": ["bundles/b0/**"]},
        ],
    },
}
GIT = [
    "git",
    "-c",
    "user.name=soak",
    "-c",
    "user.email=soak@example.invalid",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "commit.gpgsign=false",
]
TOOL_TIMEOUT = 120  # hang guard for tar, rsync, cp, git, mount


class Divergence(AssertionError):
    """An answer differs from the oracle or `--direct`, freshness was reported
    untruthfully, or a query did not answer within the hang guard."""


@dataclass
class Figures:
    steps: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # e.g. mount refused
    kills: int = 0
    stops: int = 0
    overflows: int = 0
    overflows_seen: int = 0  # the daemon's last full pass names "overflow" as its reason
    runtime_damage: int = 0
    index_damage: int = 0
    # the index folder changed by ordinary tools: by kind (tamper_index)
    tampers: Counter[str] = field(default_factory=Counter)
    concurrent_writers: int = 0
    checks: int = 0
    oracle_queries: int = 0
    direct_queries: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    divergences: int = 0
    # op kinds applied since the previous check, for each diverging check
    divergent_kinds: Counter[str] = field(default_factory=Counter)
    divergent_modes: Counter[str] = field(default_factory=Counter)
    first_divergences: list[str] = field(default_factory=list)
    heals: int = 0  # --keep-going: index storage dropped after a divergence
    seconds: float = 0.0

    @property
    def file_operations(self) -> int:
        return sum(self.operations.values())

    def as_dict(self) -> dict[str, Any]:
        ops = self.file_operations
        return {
            "steps": self.steps,
            "file_operations": ops,
            "by_operation": dict(sorted(self.operations.items())),
            "skipped": dict(sorted(self.skipped.items())),
            "kills": self.kills,
            "stops": self.stops,
            "overflows": self.overflows,
            "overflows_seen": self.overflows_seen,
            "runtime_damage": self.runtime_damage,
            "index_damage": self.index_damage,
            "tampers": dict(sorted(self.tampers.items())),
            "concurrent_writers": self.concurrent_writers,
            "checks": self.checks,
            "oracle_queries": self.oracle_queries,
            "direct_queries": self.direct_queries,
            "modes": dict(sorted(self.modes.items())),
            "divergences": self.divergences,
            "divergent_kinds": dict(sorted(self.divergent_kinds.items())),
            "divergent_modes": dict(sorted(self.divergent_modes.items())),
            "first_divergences": self.first_divergences,
            "heals": self.heals,
            "seconds": round(self.seconds, 1),
            "ops_per_second": round(ops / self.seconds, 1) if self.seconds else None,
        }


@contextlib.contextmanager
def hang_guard(seconds: float, what: str) -> Iterator[None]:
    """Raise Divergence if the body runs longer than `seconds` (SIGALRM runs
    between bytecodes); if even that cannot interrupt it (a long C call),
    faulthandler prints every thread's stack and ends the process, so a
    hang is never silent."""

    def fire(signum: int, frame: FrameType | None) -> None:
        raise Divergence(f"{what}: no answer within the {seconds:g} s hang guard")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(2 * seconds + 30, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        faulthandler.cancel_dump_traceback_later()


class Soak:
    def __init__(
        self,
        root: Path,
        seed: int,
        *,
        overflow_files: int = 20_000,
        daemon_ops: bool = True,
        check_every: int = 4,
        weights: dict[str, int] | None = None,
        direct_every: int = 1,
        hang_seconds: float = 120.0,
        keep_going: bool = False,
        time_box: float | None = None,
        tour: bool = True,
        tamper_rate: float = 0.04,
    ) -> None:
        self.root = root
        self.kb = root / SCOPE
        self.okf = root / "okf"
        self.bundles = root / BUNDLES
        self.outside = root.parent / "outside"  # mount sources and release trees
        self.rng = random.Random(seed)
        self.seed = seed
        self.overflow_files = overflow_files
        self.daemon_ops = daemon_ops
        self.check_every = max(1, check_every)
        self.weights = dict(self.FILE_OPS if weights is None else weights)
        self.direct_every = direct_every
        self.hang_seconds = hang_seconds
        self.keep_going = keep_going
        self.time_box = time_box
        self.tour = tour
        self.tamper_rate = tamper_rate  # share of steps that change .ct/okf/ by hand
        self.vocab = sorted({self._word() for _ in range(VOCAB_SIZE)})
        self.figures = Figures()
        self.log: list[str] = []
        self.window: list[str] = []  # op kinds since the last check
        self.recent: set[str] = set()  # marker words written or overwritten since then
        self.stopped: list[int] = []  # SIGSTOPped daemons (all of the project's)
        self.killed = False  # a daemon was SIGKILLed and none can have started since
        self.writer: subprocess.Popen[bytes] | None = None
        self.overflowed = False
        self.counter = 0
        self.config = "derived"
        self.mounts: dict[Path, Path] = {}  # mount point -> its source outside the project
        self.huge_written = False
        self._tree_cache: tuple[list[Path], list[Path]] | None = None

    # -- setup -----------------------------------------------------------------
    def _word(self) -> str:
        return (
            "zq"
            + "".join(
                self.rng.choice("bcdfghjklmnpqrstvwz") + self.rng.choice("aeiou") for _ in range(3)
            )
            + f"{self.rng.randrange(10)}x"
        )

    def setup(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.outside.mkdir(parents=True, exist_ok=True)
        (self.root / ".ct").mkdir(exist_ok=True)
        (self.root / ".ct" / "index.jsonc").write_bytes(self._config_bytes(self.config))
        (self.root / ".gitignore").write_text(".ct/\nokf/\n")
        self.kb.mkdir(exist_ok=True)
        (self.kb / "index.md").write_text("# kb\n")
        for i in range(12):
            self._write(self.kb / f"d{i % 3}" / f"seed{i}.md")
        self.git("init", "-q")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "main")
        self.git("checkout", "-q", "-b", "other")
        for i in range(6):
            self._write(self.kb / "branch" / f"only-other{i}.md")
        (self.kb / "d0" / "seed0.md").unlink()
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "other")
        self.git("checkout", "-q", "main")
        for b in range(2):  # untracked by git: checkout -f leaves them alone
            self._new_bundle(self.bundles / f"b{b}")

    def _new_bundle(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.md").write_text(f"# bundle {COMMON}\n")
        for _ in range(self.rng.randint(2, 4)):
            self.counter += 1
            self._write(folder / f"c{self.counter}.md")

    @staticmethod
    def _config_bytes(name: str) -> bytes:
        text = json.dumps(CONFIGS[name], indent=1).encode()
        assert len(text) < CONFIG_BYTES - 4, name
        return text + b"\n" + b" " * (CONFIG_BYTES - len(text) - 2) + b"\n"

    def git(self, *args: str) -> None:
        subprocess.run(
            [*GIT, "-C", str(self.root), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TOOL_TIMEOUT,
        )

    def _tool(self, *argv: str) -> int:
        done = subprocess.run(
            list(argv),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TOOL_TIMEOUT,
            check=False,
        )
        return done.returncode

    def _text(self, size: int | None = None) -> bytes:
        words = self.rng.sample(self.vocab, self.rng.randint(3, 12))
        tags = self.rng.sample(self.vocab[:10], 2)
        self.recent.update(words)
        self.recent.update(tags)
        if self.rng.random() < 0.3:
            # Frontmatter as YAML dumpers write it (ctindex/providers/frontmatter.py
            # reads it without libyaml): marker words only in the fields ctindex
            # indexes, the others fixed text no query asks for.
            head = (
                f"type: Table\nresource: https://x.example/t/{self.rng.randint(0, 99)}\n"
                f"title: {words[0]} {words[1]}\ndescription: {words[2]} and\n"
                f"  {words[-1]} folded\ntags:\n- {tags[0]}\n- {tags[1]}\n"
                "generated:\n  by: agent/x\n  at: '2026-07-10T23:16:28+00:00'\n"
                "sources:\n- id: src\n  resource: https://x.example/src\n"
            )
        else:
            head = f"title: {words[0]} {words[1]}\ntags: [{tags[0]}, {tags[1]}]\n"
        text = f"---\n{head}---\n{COMMON} {' '.join(words)}\n".encode()
        if size is not None:  # same size: pad or cut the body (ASCII only)
            text = (text + b" " * size)[:size] if len(text) < size else text[:size]
        return text

    def _note(self, path: Path) -> None:
        """Remember the marker words `path` holds before it is overwritten or
        removed: a stale index answers them with the old version."""
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 1 << 16:
                self.recent.update(m.decode() for m in MARKER_RE.findall(path.read_bytes()))

    def _write(self, path: Path, data: bytes | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._note(path)
        path.write_bytes(self._text() if data is None else data)

    # -- picking targets -----------------------------------------------------------
    def _mounted(self, path: Path) -> bool:
        """`path` is a mount point, inside one, or holds one: renaming it or
        removing it would cross a mount (EXDEV, EBUSY, or deleting the
        source's files through it)."""
        return any(path == m or path in m.parents or m in path.parents for m in self.mounts)

    def _tree(self) -> tuple[list[Path], list[Path]]:
        """(concept files, folders) as _files and _folders return them, from
        one walk per operation: step() drops the cache before each pick, and
        every operation looks before it changes anything. The walk is strings
        and DirEntry types (no Path or lstat per file: this was the largest
        share of the harness's own time); the order is Path order."""
        if self._tree_cache is None:
            mounts = {str(m) for m in self.mounts}
            files: list[str] = []
            folders: list[str] = []
            for top in (str(self.kb), str(self.okf)):
                pending = [top]
                while pending:
                    folder = pending.pop()
                    folders.append(folder)
                    try:
                        listing = list(os.scandir(folder))
                    except OSError:
                        continue
                    for entry in listing:
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                if entry.path not in mounts:
                                    pending.append(entry.path)
                            elif (
                                entry.name.endswith(".md")
                                and entry.name != "index.md"
                                and not entry.is_symlink()
                            ):
                                files.append(entry.path)
                        except OSError:
                            continue
            keep = {str(self.kb), str(self.okf), str(self.bundles)}
            bundles = str(self.bundles) + os.sep
            movable = [
                f
                for f in folders
                if f not in keep and (f.startswith(bundles) or not f.startswith(str(self.okf)))
            ]

            def path_order(paths: list[str]) -> list[Path]:
                return [Path(p) for p in sorted(paths, key=lambda p: p.split(os.sep))]

            self._tree_cache = (path_order(files), path_order(movable))
        return self._tree_cache

    def _files(self) -> list[Path]:
        return list(self._tree()[0])

    def _folders(self, movable: bool = False) -> list[Path]:
        """Folders below kb/ and the bundles (not kb/, okf/, okf/bundles/
        themselves); `movable`: none that a rename or rmtree would carry
        across a mount."""
        folders = self._tree()[1]
        return [f for f in folders if not (movable and self._mounted(f))]

    def _new_path(self) -> Path:
        self.counter += 1
        folders = [self.kb, *self._folders()]
        return self.rng.choice(folders) / f"n{self.counter}.md"

    # -- file operations (each returns its log line) -----------------------------------
    def op_create(self) -> str:
        path = self._new_path()
        self._write(path)
        return f"create {path.relative_to(self.root)}"

    def op_edit_same_size_restored_mtime(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        st = path.stat()
        self._note(path)
        path.write_bytes(self._text(st.st_size))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return f"edit-same-size {path.relative_to(self.root)}"

    def op_save_via_rename(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        self._note(path)
        tmp = path.with_name(f".{path.name}.swp{self.counter}")
        tmp.write_bytes(self._text())
        os.replace(tmp, path)
        return f"save-via-rename {path.relative_to(self.root)}"

    def op_rename_file(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        src, dst = self.rng.choice(files), self._new_path()
        dst.parent.mkdir(parents=True, exist_ok=True)
        self._note(src)
        os.replace(src, dst)
        return f"rename {src.relative_to(self.root)} -> {dst.relative_to(self.root)}"

    def op_rename_folder(self) -> str:
        folders = self._folders(movable=True)
        if not folders:
            return self.op_create()
        src = self.rng.choice(folders)
        self.counter += 1
        dst = self.kb / f"moved{self.counter}"
        if dst == src or str(dst).startswith(str(src) + os.sep):
            return "rename-folder skipped"
        os.rename(src, dst)
        return f"rename-folder {src.relative_to(self.root)} -> {dst.relative_to(self.root)}"

    def op_delete(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        self._note(path)
        path.unlink()
        return f"delete {path.relative_to(self.root)}"

    def op_delete_folder(self) -> str:
        folders = self._folders(movable=True)
        if not folders:
            return self.op_create()
        path = self.rng.choice(folders)
        shutil.rmtree(path)
        return f"delete-folder {path.relative_to(self.root)}"

    def op_git_checkout(self) -> str:
        branch = self.rng.choice(["main", "other"])
        done = subprocess.run(
            [*GIT, "-C", str(self.root), "checkout", "-q", "-f", branch],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TOOL_TIMEOUT,
            check=False,
        )
        return f"git checkout {branch} (exit {done.returncode})"

    def op_chmod_000(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        path.chmod(0 if self.rng.random() < 0.5 else 0o644)
        return f"chmod {path.relative_to(self.root)}"

    def op_replace_by_symlink(self) -> str:
        files = self._files()
        if len(files) < 2:
            return self.op_create()
        path, target = self.rng.sample(files, 2)
        self._note(path)
        path.unlink()
        os.symlink(target if self.rng.random() < 0.5 else "/etc/hostname", path)
        return f"symlink {path.relative_to(self.root)}"

    def op_replace_by_folder(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        self._note(path)
        path.unlink()
        self._write(path / "inner.md")
        return f"file-to-folder {path.relative_to(self.root)}"

    # -- releases: tar --mtime / rsync -a with every stamp fixed -----------------------
    def _release_tree(self) -> tuple[Path, str]:
        """A copy of okf/ (or, now and then, kb/) built outside the project,
        changed (edits, some same-size; new concepts; sometimes a whole new
        bundle folder), every stamp in it FIXED_MTIME. Returns (its parent,
        the subtree name)."""
        sub = "okf" if self.rng.random() < 0.8 else SCOPE
        stage = self.outside / "release"
        if stage.exists():
            shutil.rmtree(stage)

        def skip(folder: str, names: list[str]) -> list[str]:
            return [n for n in names if Path(folder) / n in self.mounts or n.startswith(".")]

        # ignore= works on source paths, where the mounts live.
        shutil.copytree(self.root / sub, stage / sub, symlinks=True, ignore=skip)
        src = stage / sub
        files = sorted(
            p
            for p in src.rglob("*.md")
            if p.name != "index.md" and p.is_file() and not p.is_symlink()
        )
        for path in self.rng.sample(files, min(len(files), self.rng.randint(1, 3))):
            size = path.stat().st_size if self.rng.random() < 0.5 else None
            self._note(self.root / path.relative_to(stage))
            path.write_bytes(self._text(size))
        folders = [f for f in src.rglob("*") if f.is_dir() and not f.is_symlink()]
        for _ in range(self.rng.randint(0, 2)):
            self.counter += 1
            self._write(self.rng.choice([src, *folders]) / f"r{self.counter}.md")
        if sub == "okf" and self.rng.random() < 0.4:
            self.counter += 1
            self._new_bundle(src / "bundles" / f"rb{self.counter}")
        for dirpath, dirs, names in os.walk(stage):
            for name in [*dirs, *names]:
                os.utime(Path(dirpath) / name, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        os.utime(stage, (FIXED_MTIME, FIXED_MTIME))
        return stage, sub

    def op_tar_release(self) -> str:
        stage, sub = self._release_tree()
        archive = self.outside / "release.tar"
        made = self._tool(
            "tar", f"--mtime=@{FIXED_MTIME}", "-cf", str(archive), "-C", str(stage), sub
        )
        unpacked = self._tool("tar", "-xf", str(archive), "-C", str(self.root))
        return f"tar release {sub} (exit {made}/{unpacked})"

    def op_rsync_release(self) -> str:
        stage, sub = self._release_tree()
        code = self._tool("rsync", "-a", f"{stage / sub}/", f"{self.root / sub}/")
        return f"rsync -a release {sub} (exit {code})"

    # -- same-stamp config swaps --------------------------------------------------------
    def _other_config(self) -> str:
        return self.rng.choice([n for n in CONFIGS if n != self.config])

    def op_config_swap(self) -> str:
        """Another variant written in place, then size and mtime (ns) as they were."""
        path = self.root / ".ct" / "index.jsonc"
        st = path.stat()
        self.config = self._other_config()
        with open(path, "r+b") as fh:  # in place, no truncation: never a half file
            fh.write(self._config_bytes(self.config))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return f"config swap -> {self.config} (mtime restored)"

    def op_config_swap_cp(self) -> str:
        """Another variant given the live file's mtime, then `cp -p` over it."""
        path = self.root / ".ct" / "index.jsonc"
        st = path.stat()
        self.config = self._other_config()
        staged = self.outside / "index.jsonc"
        staged.write_bytes(self._config_bytes(self.config))
        os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
        code = self._tool("cp", "-p", str(staged), str(path))
        return f"cp -p config -> {self.config} (exit {code})"

    # -- hard links -----------------------------------------------------------------------
    def op_hardlink(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        src, dst = self.rng.choice(files), self._new_path()
        os.link(src, dst)
        return f"link {src.relative_to(self.root)} -> {dst.relative_to(self.root)}"

    def op_cp_al(self) -> str:
        folders = self._folders(movable=True)
        if not folders:
            return self.op_hardlink()
        src = self.rng.choice(folders)
        self.counter += 1
        dst = src.with_name(f"{src.name}-l{self.counter}")
        code = self._tool("cp", "-al", str(src), str(dst))
        return f"cp -al {src.relative_to(self.root)} {dst.relative_to(self.root)} (exit {code})"

    def op_hardlink_edit(self) -> str:
        """Edit a multiply-linked file in place through one of its names (same
        size; the mtime restored half the time): every other name changes too."""
        linked = [p for p in self._files() if p.stat().st_nlink > 1]
        if not linked:
            return self.op_hardlink()
        path = self.rng.choice(linked)
        st = path.stat()
        self._note(path)
        with open(path, "r+b") as fh:
            fh.write(self._text(st.st_size))
        restored = self.rng.random() < 0.5
        if restored:
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return (
            f"edit in place via link {path.relative_to(self.root)} "
            f"(nlink {st.st_nlink}{', mtime restored' if restored else ''})"
        )

    # -- bind mounts ---------------------------------------------------------------------
    def op_bind_mount(self) -> str:
        """An outside folder holding concepts bind-mounted onto an empty folder
        inside a scope (root only; refused mounts count as skipped)."""
        if len(self.mounts) >= MAX_MOUNTS:
            return self.op_umount()
        self.counter += 1
        source = self.outside / f"mnt-src{self.counter}"
        for _ in range(self.rng.randint(1, 3)):
            self.counter += 1
            self._write(source / f"m{self.counter}.md")
        folders = [f for f in [self.kb, *self._folders()] if not self._mounted(f)]
        point = self.rng.choice(folders) / f"mnt{self.counter}"
        point.mkdir()
        if self.rng.random() < 0.5:  # let the daemon watch the empty folder first
            with contextlib.suppress(Divergence):
                self.search(COMMON, direct=False)
        if self._tool("mount", "--bind", str(source), str(point)) != 0:
            point.rmdir()
            self.figures.skipped["bind_mount"] += 1
            return f"mount --bind refused: {point.relative_to(self.root)} (skipped)"
        self.mounts[point] = source
        return f"mount --bind {source.name} {point.relative_to(self.root)}"

    def op_umount(self) -> str:
        if not self.mounts:
            return self.op_bind_mount()
        point = self.rng.choice(sorted(self.mounts))
        self._unmount(point)
        if self.rng.random() < 0.5:
            point.rmdir()
        return f"umount {point.relative_to(self.root)}"

    def _unmount(self, point: Path) -> None:
        for path in self.mounts[point].rglob("*.md"):
            self._note(path)
        if self._tool("umount", str(point)) != 0:
            self._tool("umount", "-l", str(point))  # busy: detach it from the tree now
        del self.mounts[point]

    def op_mount_edit(self) -> str:
        """Create or rewrite a concept inside a mounted folder, through the
        mount or through the source's own path."""
        if not self.mounts:
            return self.op_bind_mount()
        point = self.rng.choice(sorted(self.mounts))
        base = point if self.rng.random() < 0.5 else self.mounts[point]
        files = sorted(base.rglob("*.md"))
        if files and self.rng.random() < 0.7:
            path = self.rng.choice(files)
        else:
            self.counter += 1
            path = base / f"m{self.counter}.md"
        self._write(path)
        via = "mount" if base == point else "source"
        return f"edit in mount {point.relative_to(self.root)} via {via}: {path.name}"

    # -- huge repetitive documents ------------------------------------------------------------
    def op_huge_doc(self) -> str:
        """A 1-1.7 MB concept in which HUGE repeats 110k-190k times (under the
        2 MiB max_file_bytes); at most MAX_HUGE exist, older ones are removed."""
        old = [p for p in self._files() if p.stat().st_size > 1 << 19]
        if len(old) >= MAX_HUGE:
            gone = self.rng.choice(old)
            gone.unlink()
            return f"huge delete {gone.relative_to(self.root)}"
        path = self._new_path()
        words = self.rng.sample(self.vocab, 3)
        self.recent.update(words)
        body = (HUGE + " ") * self.rng.randint(110_000, 190_000)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {words[0]}\n---\n{COMMON} {body}{words[1]} {words[2]}\n")
        self.huge_written = True
        return f"huge create {path.relative_to(self.root)} ({path.stat().st_size} bytes)"

    FILE_OPS = {
        "create": 6,
        "edit_same_size_restored_mtime": 5,
        "save_via_rename": 4,
        "rename_file": 3,
        "rename_folder": 1,
        "delete": 3,
        "delete_folder": 1,
        "git_checkout": 1,
        "chmod_000": 1,
        "replace_by_symlink": 1,
        "replace_by_folder": 1,
        # the classes of docs/reliability.md "Soak: stamps, links, mounts, huge documents"
        "tar_release": 2,
        "rsync_release": 2,
        "config_swap": 1,
        "config_swap_cp": 1,
        "hardlink": 2,
        "cp_al": 1,
        "hardlink_edit": 3,
        "bind_mount": 1,
        "umount": 1,
        "mount_edit": 2,
        "huge_doc": 1,
    }
    GROWING = {
        "create",
        "replace_by_folder",
        "tar_release",
        "rsync_release",
        "hardlink",
        "cp_al",
        "bind_mount",
        "mount_edit",
        "huge_doc",
    }

    # -- daemon abuse ----------------------------------------------------------------
    def daemon_pids(self) -> list[int]:
        import psutil

        pids = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            cmd = proc.info.get("cmdline") or []
            if (
                "ctindex.daemon" in cmd
                and str(self.root) in cmd
                and proc.info.get("status") != psutil.STATUS_ZOMBIE
            ):
                pids.append(proc.pid)
        return pids

    def kill_all(self) -> None:
        for pid in self.daemon_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while self.daemon_pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    def abuse(self) -> str | None:
        """Maybe one daemon/runtime/index abuse; returns its log line."""
        if self.rng.random() < self.tamper_rate:
            what = self.tamper_index()
            if what:
                self.figures.tampers[what] += 1
                return f"tamper index: {what}"
        r = self.rng.random()
        pids = self.daemon_pids()
        if r < 0.05 and pids:
            self.kill_all()
            self.figures.kills += 1
            self.killed = True
            return "SIGKILL daemon"
        if r < 0.09 and pids:
            self._signal(pids, signal.SIGSTOP)  # all: one may be a predecessor stepping aside
            self.stopped = pids
            self.figures.stops += 1
            return "SIGSTOP daemon"
        if r < 0.10 and pids and self.overflow_files:
            bulk = self.root / SCOPE / f"bulk{self.counter}"
            bulk.mkdir()
            self.search(COMMON, direct=False)  # a barrier: bulk/ is watched from now on
            pids = self.daemon_pids()
            self._signal(pids, signal.SIGSTOP)
            self.overflowed = True
            for i in range(self.overflow_files):  # more than max_queued_events (16384)
                (bulk / f"f{i}.txt").write_bytes(b"")
            self._write(bulk / "flood.md")
            self._signal(pids, signal.SIGCONT)
            shutil.rmtree(bulk)
            self.figures.overflows += 1
            return "overflow while stopped"
        if r < 0.14:
            self.damage_runtime()
            self.figures.runtime_damage += 1
            return "damage runtime files"
        if r < 0.16:
            what = self.damage_index()
            if what:
                self.figures.index_damage += 1
                return f"damage index: {what}"
        if r < 0.20 and self.writer is None:
            verb = self.rng.choice(["update", "rebuild"])
            self.writer = subprocess.Popen(
                [sys.executable, "-m", "ctindex", "-C", str(self.root), "-q", verb],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.figures.concurrent_writers += 1
            return f"concurrent {verb}"
        return None

    def _last_reconcile_reason(self) -> str:
        from ctindex.client.control import watcher_status
        from ctindex.policy.project import Project

        last = watcher_status(Project.at(self.root)).get("last_reconcile") or {}
        return str(last.get("reason") or "")

    def damage_runtime(self) -> None:
        runtime = self.root / ".ct" / "okf" / "runtime"
        choice = self.rng.choice(["socket", "status", "claim", "failed", "all", "lock"])
        with contextlib.suppress(OSError):
            if choice == "socket":
                (runtime / "daemon.sock").unlink()
            elif choice == "all":
                shutil.rmtree(runtime)
            elif choice == "lock":
                (runtime / "daemon.lock").unlink()
            else:
                name = {"status": "status.json", "claim": "spawn.claim", "failed": "spawn.failed"}[
                    choice
                ]
                (runtime / name).write_bytes(b"\x00garbage{\xff")
                if choice == "claim":
                    old = time.time() - 60
                    os.utime(runtime / name, (old, old))

    def damage_index(self) -> str | None:
        index = self.root / ".ct" / "okf"
        segs = sorted(index.glob("seg-*.seg"))
        if not segs:
            return None
        path = self.rng.choice(segs)
        with contextlib.suppress(OSError):
            data = bytearray(path.read_bytes())
            data[self.rng.randrange(min(len(data), 200))] ^= 0xFF
            path.write_bytes(bytes(data))
        return path.name

    # -- the index folder changed by ordinary tools (ctindex/daemon/storeguard.py) ----
    TAMPERS = (
        "backup",
        "restore-manifest",
        "restore-store",
        "foreign-store",
        "truncate-segment",
        "git-stash",
    )

    def _rsync_store(self, source: Path, target: Path) -> None:
        """rsync -a --delete of a store, its runtime folder left alone."""
        target.mkdir(parents=True, exist_ok=True)
        self._tool("rsync", "-a", "--delete", "--exclude", "runtime/", f"{source}/", f"{target}/")

    def _foreign_store(self) -> Path:
        """Another project's store (same scope name, its own documents),
        built once, with a generation number that runs ahead."""
        other = self.outside / "other-project"
        store = other / ".ct" / "okf"
        if not (store / "MANIFEST").exists():
            (other / ".ct").mkdir(parents=True, exist_ok=True)
            (other / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}\n')
            (other / ".git").mkdir(exist_ok=True)
            (other / SCOPE).mkdir(exist_ok=True)
            (other / SCOPE / "index.md").write_text("# kb\n")
            for i in range(3):
                self._write(other / SCOPE / f"d{i}" / f"seed{i}.md")
                self._tool(sys.executable, "-m", "ctindex", "-C", str(other), "-q", "update")
        return store

    def tamper_index(self) -> str | None:
        """One change to `.ct/okf/` that no ctindex writer made: a backup
        taken now, restored later (one file or the whole store), another
        project's store copied in, a segment truncated, or `git stash -u`
        of a store that is not git-ignored, with an edit in between."""
        index = self.root / ".ct" / "okf"
        backup = self.outside / "store-backup"
        what = self.rng.choice(self.TAMPERS)
        if not (index / "MANIFEST").exists():
            return None
        if what == "backup" or not (backup / "MANIFEST").exists():
            self._rsync_store(index, backup)
            return "backup taken"
        if what == "restore-manifest":
            self._tool("cp", "-p", str(backup / "MANIFEST"), str(index / "MANIFEST"))
        elif what == "restore-store":
            self._rsync_store(backup, index)
        elif what == "foreign-store":
            self._rsync_store(self._foreign_store(), index)
        elif what == "truncate-segment":
            segs = sorted(index.glob("seg-*.seg"))
            if not segs:
                return None
            seg = self.rng.choice(segs)
            with contextlib.suppress(OSError):
                os.truncate(seg, seg.stat().st_size // 2)
        else:
            self._stash_store()
        return what

    def _stash_store(self) -> None:
        """`.ct/` not git-ignored: `git stash -u` takes the store away, a
        document is edited, `git stash pop` brings the older store back."""
        ignore = self.root / ".gitignore"
        kept = ignore.read_bytes()
        ignore.write_text(".ct/okf/runtime/\nokf/\n")
        try:
            self.git("add", ".gitignore")
            self.git("commit", "-q", "-m", "stop ignoring .ct")
            code = self._tool(
                *GIT, "-C", str(self.root), "stash", "push", "-u", "-q", "--", ".ct/okf"
            )
            self.op_create()  # an edit while the store is away
            self._tree_cache = None
            if code == 0:
                self._tool(*GIT, "-C", str(self.root), "stash", "pop", "-q")
        finally:
            ignore.write_bytes(kept)
            self.git("add", ".gitignore")
            self.git("commit", "-q", "-m", "ignore .ct again")

    # -- checking ------------------------------------------------------------------------
    def search(self, query: str, direct: bool) -> dict[str, Any]:
        from ctindex.cli import main

        out, err = io.StringIO(), io.StringIO()
        args = [
            "-C",
            str(self.root),
            "--json",
            "search",
            "--limit",
            "100000",
            *(["--direct"] if direct else []),
            "--",
            query,
        ]
        with hang_guard(self.hang_seconds, f"search {'--direct ' if direct else ''}{query!r}"):
            code = main(args, stdout=out, stderr=err)
        if code not in (0, 1):
            raise Divergence(
                f"search {'--direct ' if direct else ''}{query!r} exit {code}: "
                f"{err.getvalue().strip()}"
            )
        doc: dict[str, Any] = json.loads(out.getvalue())
        return doc

    def marker_words(self) -> list[str]:
        """COMMON (every document: creations, deletions, renames, scope
        changes), HUGE once huge documents exist, up to three words written or
        overwritten since the last check (edits), one word at random."""
        words = [COMMON, *([HUGE] if self.huge_written else [])]
        words += self.rng.sample(sorted(self.recent), min(3, len(self.recent)))
        words.append(self.rng.choice(self.vocab))
        self.recent.clear()
        return list(dict.fromkeys(words))

    def language_query(self) -> str:
        w1, w2 = self.rng.sample(self.vocab, 2)
        return self.rng.choice(
            [
                f"{w1} OR tag:{self.rng.choice(self.vocab[:10])}",
                f"{w2[:5]}* -{w1}",
                f"path:{SCOPE}/d1/ {COMMON}",
            ]
        )

    def _freshness(self, n: int, alive: list[int], fresh: dict[str, Any]) -> None:
        self.figures.modes[fresh["mode"]] += 1
        if fresh["mode"] not in ("watcher-clean", "fallback"):
            raise Divergence(f"unexpected freshness mode {fresh}")
        if self.stopped:
            if fresh["mode"] == "watcher-clean":
                raise Divergence(f"watcher-clean while the daemon is stopped: {fresh}")
            # One query proves it; the rest run with the daemon resumed
            # (each stopped query costs a whole barrier budget).
            self._signal(self.stopped, signal.SIGCONT)
            self.stopped = []
        if n == 0 and self.killed and not alive and fresh["mode"] != "fallback":
            raise Divergence(f"not a fallback right after SIGKILL: {fresh}")
        if fresh["mode"] == "watcher-clean" and (
            fresh["barrier_ms"] is None or fresh["generation"] is None
        ):
            raise Divergence(f"watcher-clean without a barrier: {fresh}")

    def check(self) -> list[str]:
        """Run the queries; returns the divergences found (each one line)."""
        alive = self.daemon_pids()
        words = self.marker_words()
        answers = []
        problems: list[str] = []
        for n, word in enumerate(words):
            got = self.search(word, direct=False)
            self.figures.oracle_queries += 1
            self._freshness(n, alive, got["freshness"])
            answers.append((word, got))
        self.killed = False
        want = oracle.containing_each(self.root, words)
        for word, got in answers:
            paths = {r["path"] for r in got["results"]}
            if paths != want[word]:
                fresh = got["freshness"]
                self.figures.divergent_modes[fresh["mode"]] += 1
                problems.append(
                    f"{word!r} [{self.config}]: indexed-only {sorted(paths - want[word])[:4]}, "
                    f"oracle-only {sorted(want[word] - paths)[:4]} "
                    f"(freshness {fresh['mode']} {fresh.get('reason')})"
                )
        if self.direct_every and self.figures.checks % self.direct_every == 0:
            query = self.language_query()
            got, direct = self.search(query, direct=False), self.search(query, direct=True)
            self.figures.direct_queries += 1
            self.figures.modes[got["freshness"]["mode"]] += 1
            a = {r["path"] for r in got["results"]}
            b = {r["path"] for r in direct["results"]}
            if a != b:
                self.figures.divergent_modes[got["freshness"]["mode"]] += 1
                problems.append(
                    f"{query!r} [{self.config}]: indexed-only {sorted(a - b)[:4]}, "
                    f"direct-only {sorted(b - a)[:4]} "
                    f"(freshness {got['freshness']})"
                )
        self.figures.checks += 1
        return problems

    # -- the loop ------------------------------------------------------------------------
    def _pick(self, tour: list[str]) -> str:
        if tour:
            return tour.pop()
        names = [n for n, w in self.weights.items() if w > 0]
        name = self.rng.choices(names, [self.weights[n] for n in names])[0]
        if name in self.GROWING and len(self._files()) > MAX_FILES:
            return "delete_folder" if self.rng.random() < 0.2 else "delete"
        return name

    def step(self, budget: int, tour: list[str]) -> None:
        for _ in range(min(budget, self.rng.randint(1, 2 * self.check_every - 1))):
            self._tree_cache = None  # the last operation changed the tree
            name = self._pick(tour)
            self.log.append(getattr(self, f"op_{name}")())
            self.figures.operations[name] += 1
            self.window.append(name)
        if self.daemon_ops:
            line = self.abuse()
            if line:
                self.log.append(line)
        problems = self.check()
        if problems:
            self.figures.divergences += len(problems)
            self.figures.divergent_kinds.update(set(self.window))
            tail = "\n  ".join(self.log[-12:])
            report = (
                f"seed {self.seed}, step {self.figures.steps}, "
                f"op {self.figures.file_operations}: "
                + "\n  ".join(problems)
                + f"\n  after:\n  {tail}"
            )
            if not self.keep_going:
                raise Divergence(report)
            if len(self.figures.first_divergences) < 10:
                self.figures.first_divergences.append(report)
            self.heal()
        self.window = []
        if self.overflowed:
            self.overflowed = False
            if "overflow" in self._last_reconcile_reason():
                self.figures.overflows_seen += 1
        self._signal(self.stopped, signal.SIGCONT)
        self.stopped = []
        if self.writer is not None and self.writer.poll() is not None:
            self.writer = None
        self.figures.steps += 1

    def heal(self) -> None:
        """--keep-going: drop every daemon and the whole index storage, so the
        next check starts from a fresh build and a stale state found once is
        not counted again at every later check."""
        self.kill_all()
        if self.writer is not None:
            self.writer.kill()
            self.writer.wait()
            self.writer = None
        shutil.rmtree(self.root / ".ct" / "okf", ignore_errors=True)
        self.figures.heals += 1

    def run(self, ops: int) -> Figures:
        t0 = time.monotonic()
        tour = [n for n, w in self.weights.items() if w > 0] if self.tour else []
        self.rng.shuffle(tour)
        try:
            while self.figures.file_operations < ops:
                if self.time_box is not None and time.monotonic() - t0 > self.time_box:
                    break
                self.step(ops - self.figures.file_operations, tour)
        finally:
            self.figures.seconds = time.monotonic() - t0
            self.close()
        return self.figures

    @staticmethod
    def _signal(pids: list[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def close(self) -> None:
        self._signal(self.stopped, signal.SIGCONT)
        if self.writer is not None:
            self.writer.kill()
            self.writer.wait()
        self.kill_all()
        for point in sorted(self.mounts, reverse=True):
            self._unmount(point)


def run_soak(root: Path, ops: int, seed: int, **kwargs: Any) -> Figures:
    soak = Soak(root, seed, **kwargs)
    soak.setup()
    return soak.run(ops)


def _weights(only: str | None, overrides: list[str]) -> dict[str, int]:
    weights = dict(Soak.FILE_OPS)
    if only:
        chosen = {n.strip().replace("-", "_") for n in only.split(",") if n.strip()}
        unknown = chosen - set(weights)
        if unknown:
            raise SystemExit(f"soak: unknown operation kind(s): {', '.join(sorted(unknown))}")
        weights = {n: (w if n in chosen else 0) for n, w in weights.items()}
    for item in overrides:
        name, _, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if name not in weights or not value.strip().isdigit():
            raise SystemExit(f"soak: --weight wants KIND=N with a known kind, got {item!r}")
        weights[name] = int(value)
    if not any(weights.values()):
        raise SystemExit("soak: every operation kind has weight 0")
    return weights


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=3000, help="file-system operations to apply")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--overflow-files", type=int, default=20_000)
    ap.add_argument(
        "--check-every",
        type=int,
        default=4,
        metavar="K",
        help="mean file operations between two query batches",
    )
    ap.add_argument(
        "--direct-every",
        type=int,
        default=1,
        metavar="N",
        help="compare one query with --direct every N checks (0: never)",
    )
    ap.add_argument(
        "--only",
        default=None,
        metavar="KIND,...",
        help="only these operation kinds (names of Soak.FILE_OPS)",
    )
    ap.add_argument("--weight", action="append", default=[], metavar="KIND=N")
    ap.add_argument("--no-abuse", action="store_true", help="no daemon kills/stops/damage")
    ap.add_argument(
        "--tamper-rate",
        type=float,
        default=0.04,
        metavar="P",
        help="share of steps that change the index folder with ordinary tools",
    )
    ap.add_argument("--hang-guard", type=float, default=120.0, metavar="S")
    ap.add_argument(
        "--time-box",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds and print the figures so far",
    )
    ap.add_argument(
        "--keep-going",
        action="store_true",
        help="count divergences (dropping the index after each) instead of stopping at the first",
    )
    args = ap.parse_args(argv)
    weights = _weights(args.only, args.weight)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"soak seed {seed} (replay: --seed {seed}), {args.ops} file operations", flush=True)
    base = Path(tempfile.mkdtemp(prefix="ctindex-soak-", dir=args.workdir))
    try:
        figures = run_soak(
            base / "project",
            args.ops,
            seed,
            overflow_files=args.overflow_files,
            daemon_ops=not args.no_abuse,
            check_every=args.check_every,
            weights=weights,
            direct_every=args.direct_every,
            hang_seconds=args.hang_guard,
            keep_going=args.keep_going,
            time_box=args.time_box,
            tamper_rate=args.tamper_rate,
        )
    except Divergence as exc:
        print(f"DIVERGENCE: {exc}", flush=True)
        print(f"kept for inspection: {base}", flush=True)
        return 1
    doc = {"seed": seed, **figures.as_dict()}
    print(json.dumps(doc, indent=1), flush=True)
    if figures.divergences:
        print(f"kept for inspection: {base}", flush=True)
        return 1
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
