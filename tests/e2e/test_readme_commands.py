"""The README's "Try it" leaves a clone clean: the first query builds the
index and starts no tracked change, so `git status` of the checkout says
nothing (the sample's `.ct/.gitignore` covers `.ct/okf/`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {k: v for k, v in os.environ.items() if k not in ("CTINDEX_WATCH",)}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_the_first_query_leaves_git_status_clean(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(
        REPO / "fixtures" / "sample",
        clone / "fixtures" / "sample",
        ignore=lambda d, names: ["okf"] if d.endswith(".ct") else [],
    )
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "sample")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctindex",
            "-C",
            "fixtures/sample",
            "search",
            "bitcoin transactions",
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        env={**ENV, "CI": "1"},  # no daemon left behind by the test
        timeout=120,
    )
    assert done.returncode == 0 and "bitcoin" in done.stdout.lower(), done.stderr
    assert (clone / "fixtures" / "sample" / ".ct" / "okf" / "MANIFEST").exists()
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout"
)
def test_no_build_output_is_tracked() -> None:
    """The README's install compiles the optional C modules into the
    checkout: a tracked one would leave every clone dirty (and hold one
    machine's build). Each must be ignored, none committed."""
    tracked = _git(REPO, "ls-files").splitlines()
    built = [p for p in tracked if p.endswith((".so", ".pyd", ".o", ".dylib"))]
    assert built == []
    sources = [p for p in tracked if p.startswith("ctindex/") and p.endswith(".c")]
    assert sources  # the C modules setup.py builds
    for source in sources:
        built_name = source[: -len(".c")] + ".cpython-311-x86_64-linux-gnu.so"
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", built_name], cwd=REPO, timeout=60
        )
        assert ignored.returncode == 0, f"{built_name} would not be ignored"


def test_watch_stop_right_after_the_first_query_stops_its_daemon(tmp_path: Path) -> None:
    """The README's "Try it" starts a daemon detached; its `watch stop`, run
    at once, finds it starting (no lock yet, or no identity yet) and must
    still stop it, not answer "not running" while it comes up."""
    sample = tmp_path / "sample"
    shutil.copytree(
        REPO / "fixtures" / "sample",
        sample,
        ignore=lambda d, names: ["okf"] if d.endswith(".ct") else [],
    )
    env = {k: v for k, v in ENV.items() if k != "CI"}

    def ctindex(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ctindex", "-C", str(sample), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    assert ctindex("search", "bitcoin transactions").returncode == 0
    stop = ctindex("watch", "stop")
    assert stop.returncode == 0 and stop.stdout.startswith("daemon stopped"), stop.stdout
    status = ctindex("--json", "watch", "status")
    assert '"running": false' in status.stdout, status.stdout
