"""Differential soak: random file operations and daemon abuse, checked after
every step against the `--direct` oracle (issue 6 §1).

    python -m tests.soak_harness --steps 1000 [--seed N] [--workdir DIR]

Each step applies 1 to 4 random file operations to a project (a git repository
with two branches), sometimes abuses the daemon (SIGKILL, SIGSTOP/SIGCONT,
an event-queue overflow while stopped, damaged runtime or index files, a
concurrent `update`/`rebuild`), then runs a few queries both indexed and
`--direct` and requires equal result sets and a truthful freshness report:

* a query answered while the daemon is SIGSTOPped is never `watcher-clean`
  (no barrier can succeed);
* a query right after the daemon was SIGKILLed (no daemon alive) is a
  `fallback`;
* `watcher-clean` always comes with a barrier time and a generation.

The seed is printed first; the same seed replays the same operations (the
daemon's timing is not replayed, so a failure may need a few runs). Searches
run in-process (`ctindex.cli.main`) to keep steps cheap; the daemon is the
real detached process a search spawns.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPE = "kb"
VOCAB_SIZE = 120
CONFIG = {"version": 1, "watch": True, "debounce_ms": 20, "barrier_timeout_ms": 1000,
          "idle_seconds": 120, "audit_seconds": 30,
          "scopes": [{"root": SCOPE, "provider": "okf-markdown"}]}
GIT = ["git", "-c", "user.name=soak", "-c", "user.email=soak@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


class Divergence(AssertionError):
    """Indexed and direct answers differ, or freshness was reported untruthfully."""


@dataclass
class Figures:
    steps: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    stops: int = 0
    overflows: int = 0
    overflows_seen: int = 0  # the daemon's last full pass names "overflow" as its reason
    runtime_damage: int = 0
    index_damage: int = 0
    concurrent_writers: int = 0
    queries: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    divergences: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "file_operations": sum(self.operations.values()),
                "by_operation": dict(sorted(self.operations.items())), "kills": self.kills,
                "stops": self.stops, "overflows": self.overflows,
                "overflows_seen": self.overflows_seen,
                "runtime_damage": self.runtime_damage, "index_damage": self.index_damage,
                "concurrent_writers": self.concurrent_writers, "queries": self.queries,
                "modes": dict(sorted(self.modes.items())), "divergences": self.divergences}


class Soak:
    def __init__(self, root: Path, seed: int, *, overflow_files: int = 20_000,
                 daemon_ops: bool = True) -> None:
        self.root = root
        self.kb = root / SCOPE
        self.rng = random.Random(seed)
        self.seed = seed
        self.overflow_files = overflow_files
        self.daemon_ops = daemon_ops
        self.vocab = [self._word() for _ in range(VOCAB_SIZE)]
        self.figures = Figures()
        self.log: list[str] = []
        self.stopped: list[int] = []  # SIGSTOPped daemons (all of the project's)
        self.killed = False  # a daemon was SIGKILLed and none can have started since
        self.writer: subprocess.Popen[bytes] | None = None
        self.overflowed = False
        self.counter = 0

    # -- setup -----------------------------------------------------------------
    def _word(self) -> str:
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz") + self.rng.choice("aeiou")
                       for _ in range(4))

    def setup(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ".ct").mkdir(exist_ok=True)
        (self.root / ".ct" / "index.jsonc").write_text(json.dumps(CONFIG))
        (self.root / ".gitignore").write_text(".ct/\n")
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

    def git(self, *args: str) -> None:
        subprocess.run([*GIT, "-C", str(self.root), *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    def _text(self, size: int | None = None) -> bytes:
        words = self.rng.sample(self.vocab, self.rng.randint(3, 12))
        tags = self.rng.sample(self.vocab[:10], 2)
        text = (f"---\ntitle: {words[0]} {words[1]}\ntags: [{tags[0]}, {tags[1]}]\n---\n"
                f"common {' '.join(words)}\n").encode()
        if size is not None:  # same size: pad or cut the body (ASCII only)
            text = (text + b" " * size)[:size] if len(text) < size else text[:size]
        return text

    def _write(self, path: Path, data: bytes | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self._text() if data is None else data)

    # -- picking targets -----------------------------------------------------------
    def _files(self) -> list[Path]:
        out = []
        for dirpath, _, names in os.walk(self.kb):
            out += [Path(dirpath) / n for n in names if n.endswith(".md")]
        return sorted(p for p in out if not p.is_symlink())

    def _folders(self) -> list[Path]:
        return sorted(Path(d) for d, _, _ in os.walk(self.kb) if Path(d) != self.kb)

    def _new_path(self) -> Path:
        self.counter += 1
        folders = [self.kb, *self._folders()]
        return self.rng.choice(folders) / f"n{self.counter}-{self.rng.choice(self.vocab)}.md"

    # -- file operations -----------------------------------------------------------
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
        path.write_bytes(self._text(st.st_size))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return f"edit-same-size {path.relative_to(self.root)}"

    def op_save_via_rename(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
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
        os.replace(src, dst)
        return f"rename {src.relative_to(self.root)} -> {dst.relative_to(self.root)}"

    def op_rename_folder(self) -> str:
        folders = self._folders()
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
        path.unlink()
        return f"delete {path.relative_to(self.root)}"

    def op_delete_folder(self) -> str:
        folders = self._folders()
        if not folders:
            return self.op_create()
        path = self.rng.choice(folders)
        shutil.rmtree(path)
        return f"delete-folder {path.relative_to(self.root)}"

    def op_git_checkout(self) -> str:
        branch = self.rng.choice(["main", "other"])
        done = subprocess.run([*GIT, "-C", str(self.root), "checkout", "-q", "-f", branch],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60, check=False)
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
        path.unlink()
        os.symlink(target if self.rng.random() < 0.5 else "/etc/hostname", path)
        return f"symlink {path.relative_to(self.root)}"

    def op_replace_by_folder(self) -> str:
        files = self._files()
        if not files:
            return self.op_create()
        path = self.rng.choice(files)
        path.unlink()
        self._write(path / "inner.md")
        return f"file-to-folder {path.relative_to(self.root)}"

    FILE_OPS = {
        "create": 6, "edit_same_size_restored_mtime": 5, "save_via_rename": 4,
        "rename_file": 3, "rename_folder": 1, "delete": 3, "delete_folder": 1,
        "git_checkout": 1, "chmod_000": 1, "replace_by_symlink": 1, "replace_by_folder": 1,
    }

    # -- daemon abuse ----------------------------------------------------------------
    def daemon_pids(self) -> list[int]:
        import psutil

        pids = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            cmd = proc.info.get("cmdline") or []
            if ("ctindex.daemon" in cmd and str(self.root) in cmd
                    and proc.info.get("status") != psutil.STATUS_ZOMBIE):
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
            self.search("common", direct=False)  # a barrier: bulk/ is watched from now on
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
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.figures.concurrent_writers += 1
            return f"concurrent {verb}"
        return None

    def _last_reconcile_reason(self) -> str:
        from ctindex.client import watcher_status
        from ctindex.project import Project

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
                name = {"status": "status.json", "claim": "spawn.claim",
                        "failed": "spawn.failed"}[choice]
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

    # -- checking ------------------------------------------------------------------------
    def search(self, query: str, direct: bool) -> dict[str, Any]:
        from ctindex.cli import main

        out, err = io.StringIO(), io.StringIO()
        args = ["-C", str(self.root), "--json", "search", "--limit", "100000",
                *(["--direct"] if direct else []), "--", query]
        code = main(args, stdout=out, stderr=err)
        if code not in (0, 1):
            raise Divergence(f"search {'--direct ' if direct else ''}{query!r} exit {code}: "
                             f"{err.getvalue().strip()}")
        doc: dict[str, Any] = json.loads(out.getvalue())
        return doc

    def queries(self) -> list[str]:
        w1, w2 = self.rng.sample(self.vocab, 2)
        return ["common", f"{w1} OR tag:{self.rng.choice(self.vocab[:10])}",
                f"{w2[:3]}* -{w1}", f"path:{SCOPE}/d1/ common"]

    def check(self) -> None:
        alive = self.daemon_pids()
        for n, query in enumerate(self.queries()):
            got = self.search(query, direct=False)
            want = self.search(query, direct=True)
            self.figures.queries += 1
            fresh = got["freshness"]
            self.figures.modes[fresh["mode"]] += 1
            a = {r["path"] for r in got["results"]}
            b = {r["path"] for r in want["results"]}
            if a != b:
                raise Divergence(f"{query!r}: indexed-only {sorted(a - b)[:5]}, "
                                 f"direct-only {sorted(b - a)[:5]} (freshness {fresh})")
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
            if fresh["mode"] == "watcher-clean" and (fresh["barrier_ms"] is None
                                                     or fresh["generation"] is None):
                raise Divergence(f"watcher-clean without a barrier: {fresh}")
        self.killed = False

    # -- the loop ------------------------------------------------------------------------
    def step(self) -> None:
        names = list(self.FILE_OPS)
        weights = [self.FILE_OPS[n] for n in names]
        for _ in range(self.rng.randint(1, 4)):
            name = self.rng.choices(names, weights)[0]
            self.log.append(getattr(self, f"op_{name}")())
            self.figures.operations[name] += 1
        if self.daemon_ops:
            line = self.abuse()
            if line:
                self.log.append(line)
        self.check()
        if self.overflowed:
            self.overflowed = False
            if "overflow" in self._last_reconcile_reason():
                self.figures.overflows_seen += 1
        self._signal(self.stopped, signal.SIGCONT)
        self.stopped = []
        if self.writer is not None and self.writer.poll() is not None:
            self.writer = None
        self.figures.steps += 1

    def run(self, steps: int) -> Figures:
        try:
            for i in range(steps):
                mark = len(self.log)
                try:
                    self.step()
                except Divergence as exc:
                    self.figures.divergences += 1
                    tail = "\n  ".join(self.log[max(0, mark - 12):])
                    raise Divergence(f"seed {self.seed}, step {i}: {exc}\n  after:\n  "
                                     f"{tail}") from None
        finally:
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


def run_soak(root: Path, steps: int, seed: int, **kwargs: Any) -> Figures:
    soak = Soak(root, seed, **kwargs)
    soak.setup()
    return soak.run(steps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--overflow-files", type=int, default=20_000)
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"soak seed {seed} (replay: --seed {seed}), {args.steps} steps", flush=True)
    base = Path(tempfile.mkdtemp(prefix="ctindex-soak-", dir=args.workdir))
    t0 = time.monotonic()
    try:
        figures = run_soak(base / "project", args.steps, seed,
                           overflow_files=args.overflow_files)
    except Divergence as exc:
        print(f"DIVERGENCE: {exc}", flush=True)
        print(f"kept for inspection: {base}", flush=True)
        return 1
    shutil.rmtree(base, ignore_errors=True)
    doc = {"seed": seed, "seconds": round(time.monotonic() - t0, 1), **figures.as_dict()}
    print(json.dumps(doc, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
