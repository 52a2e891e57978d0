"""Shared fixtures.

* ``corpus`` — the four OKF bundles shipped in ``fixtures/okf-bundles`` (read-only).
* ``bundles_project`` — a temporary project ``tmp_path/project`` holding all four
  bundles at ``okf/bundles/<name>/`` and an empty ``.git`` folder.
* ``make_project(*bundles, git=True)`` — the same with a chosen set of bundles.
* ``run_cli(*args, cwd=None)`` — ctindex in-process: ``CliResult(code, out, err)``
  (``cli_main``, the same as a plain function, for module-scoped fixtures).
* ``write_config(project, *roots, **settings)`` — ``project/.ct/index.jsonc``.
* ``run_cli_subprocess(*args, cwd=None, env=None, program="ctindex")`` — a real
  process (``python -m ctindex``, or ``ct`` via ``ctindex.cli:ct_main``), text
  decoded with surrogateescape.
* ``make_cli_project(config=None, root=None, bundles=...)`` — a
  ``tests.daemon_support.CliProject`` (real CLI processes, real daemon); every
  daemon it started is killed at teardown. ``cli_project`` — one such project.
* ``@pytest.mark.needs("dir_fd" | "peercred")`` — the test asserts that
  primitive itself; skipped, with the reason, where it is absent or hidden by
  ``CTINDEX_SIMULATE`` (docs/decisions/portability.md). Tests that start a
  daemon through tests/daemon_support.py need no marker: its helpers skip.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import psutil

    from tests.daemon_support import CliProject

# The suite tests lazy daemon starts; run under a CI service (which sets CI)
# searches would start none (ctindex/query/cimode.py). tests/ctindex/query/test_cimode.py sets
# CI explicitly for the processes it runs.
os.environ.pop("CI", None)
os.environ.pop("CTINDEX_WATCH", None)

REPO = Path(__file__).resolve().parent.parent


def copy_package(target: Path) -> Path:
    """A copy of the package (``ctindex/`` as it installs) under `target`:
    put `target` on PYTHONPATH to run that copy as another build."""
    shutil.copytree(
        REPO / "ctindex", target / "ctindex", ignore=shutil.ignore_patterns("__pycache__")
    )
    return target


def outlive_racy_window(root: Path) -> None:
    """Wait until every stamp under `root` is older than the racy-clean window
    (reconciler.DEFAULT_GRANULARITY_NS), so what a pass records is trusted
    from the start: tests that count published or opened generations would
    otherwise see the later pass that confirms racily clean entries."""
    import time

    from ctindex.reconciler import DEFAULT_GRANULARITY_NS

    newest = 0
    for folder, _dirs, names in os.walk(root):
        for name in (".", *names):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    wait = (newest + DEFAULT_GRANULARITY_NS - time.time_ns()) / 1e9 + 0.05
    if wait > 0:
        time.sleep(wait)


CORPUS = REPO / "fixtures" / "okf-bundles"
BUNDLES = ("acme_retail", "crypto_bitcoin", "ga4", "stackoverflow")


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture(scope="session")
def corpus() -> Path:
    return CORPUS


def copy_bundles(project: Path, bundles: tuple[str, ...] = BUNDLES, git: bool = True) -> Path:
    target = project / "okf" / "bundles"
    target.mkdir(parents=True, exist_ok=True)
    for name in bundles:
        shutil.copytree(CORPUS / name, target / name)
    if git:
        (project / ".git").mkdir(exist_ok=True)
    return project


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A git checkout of plain Markdown: no OKF root, so no scope."""
    project = tmp_path / "plain"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / "hello.md").write_text("# Hello\n\nhello world\n")
    (project / ".git").mkdir()
    return project


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1_000))

    def make(*bundles: str, git: bool = True) -> Path:
        project = tmp_path / f"project{next(counter) or ''}"
        project.mkdir()
        return copy_bundles(project, bundles, git)

    return make


@pytest.fixture
def bundles_project(make_project: Callable[..., Path]) -> Path:
    return make_project(*BUNDLES)


def cli_main(*args: str, cwd: str | os.PathLike[str] | None = None) -> CliResult:
    """ctindex in-process: main() with captured output streams."""
    from ctindex.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err, cwd=cwd)
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    return cli_main


def write_config(project: Path, *roots: str, **settings: Any) -> Path:
    """Write project/.ct/index.jsonc: version 1, the settings (watch=False,
    max_file_bytes=...), one okf-markdown scope per root; returns the file."""
    config = project / ".ct" / "index.jsonc"
    config.parent.mkdir(parents=True, exist_ok=True)
    scopes = [{"root": root, "provider": "okf-markdown"} for root in roots]
    config.write_text(json.dumps({"version": 1, **settings, "scopes": scopes}))
    return config


@pytest.fixture
def run_cli_subprocess() -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        *args: str,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        program: str = "ctindex",
    ) -> subprocess.CompletedProcess[str]:
        if program == "ct":
            command = [
                sys.executable,
                "-c",
                "import sys; from ctindex.cli import ct_main; sys.exit(ct_main())",
            ]
        else:
            command = [sys.executable, "-m", "ctindex"]
        return subprocess.run(
            [*command, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=120,
            check=False,
        )

    return run


@pytest.fixture
def make_cli_project(tmp_path: Path) -> Iterator[Callable[..., CliProject]]:
    from tests.daemon_support import CliProject

    made: list[CliProject] = []

    def build(
        config: dict[str, Any] | None = None,
        root: Path | None = None,
        bundles: tuple[str, ...] | None = None,
    ) -> CliProject:
        root = root or tmp_path / f"proj{len(made) or ''}"
        project = (
            CliProject(root, config=config)
            if bundles is None
            else CliProject(root, bundles, config)
        )
        made.append(project)
        return project

    try:
        yield build
    finally:
        for project in made:
            project.kill_daemons()


@pytest.fixture
def cli_project(make_cli_project: Callable[..., CliProject]) -> CliProject:
    return make_cli_project()


def _daemons_under(base: Path) -> list[psutil.Process]:
    """Daemon processes (`-m ctindex.daemon --project P`) whose project P lies under `base`."""
    import psutil

    roots = {str(base), os.path.realpath(base)}
    found: list[psutil.Process] = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if "ctindex.daemon" not in cmd or "--project" not in cmd:
            continue
        i = cmd.index("--project")
        project = cmd[i + 1] if i + 1 < len(cmd) else ""
        if any(project == r or project.startswith(r + os.sep) for r in roots):
            found.append(proc)
    return found


@pytest.fixture(scope="session", autouse=True)
def _stop_leftover_daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Safety net: tests that search with `watch` on spawn detached daemons
    (new session, 1 h idle timeout). At session end, stop every daemon whose
    project lies under this run's tmp base (SIGTERM, then SIGKILL)."""
    yield
    import psutil

    procs = _daemons_under(tmp_path_factory.getbasetemp())
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=3)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()


# -- simulated platforms (docs/decisions/portability.md) ------------------------


def _dir_fd_absent() -> str | None:
    from ctindex.reconciler import platform_features

    if platform_features.has_dir_fd():
        return None
    return "no dir_fd opens here (CTINDEX_SIMULATE=no-dir-fd or the platform): path walk only"


def _peercred_absent() -> str | None:
    from ctindex.ipc.peer import no_peer_check

    return no_peer_check()


# What each `needs` name asks of: the same switches production code reads
# (ctindex/reconciler/platform_features.py, ctindex/ipc/peer.py), so a skip here
# means exactly "this process would take the fallback".
NEEDS: dict[str, Callable[[], str | None]] = {
    "dir_fd": _dir_fd_absent,
    "peercred": _peercred_absent,
}


# -- tiers: the quick suite and the slow one (README, "Tests") -----------------------
#
# `python -m pytest -q -n auto` runs the quick tier, the contributor's loop:
# every module's tests but those marked `slow` (a soak, a differential run
# against real tools, the sshfs rig, a property test of thousands of
# examples: each of them takes eight seconds or more). `--tier slow` runs
# just those, `--tier all` everything; CI (.ci/run) runs both tiers.
TIERS = ("quick", "slow", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="quick",
        help="quick: all but the tests marked slow (the default); slow: only those; all: both",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts `cmd &` with Ctrl-C ignored, and a
    # program inherits that (CPython keeps an ignored SIGINT ignored). The
    # Ctrl-C tests (tests/e2e/test_sigint.py, the share host's) send SIGINT
    # to the processes they start, so those must see it whatever launched
    # pytest: a handler here is reset to the default across their exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers",
        "needs(primitive): the test asserts a Linux primitive itself"
        f" ({', '.join(sorted(NEEDS))}); skipped where it is absent or simulated away",
    )
    config.addinivalue_line(
        "markers",
        "slow: eight seconds or more (a soak, real tools, the sshfs rig): the slow tier (--tier)",
    )


def _by_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    if tier == "all":
        return
    slow = tier == "slow"
    keep = [i for i in items if (i.get_closest_marker("slow") is not None) == slow]
    dropped = [i for i in items if (i.get_closest_marker("slow") is not None) != slow]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _by_tier(config, items)
    for item in items:
        for mark in item.iter_markers("needs"):
            if mark.args[0] not in NEEDS:
                raise pytest.UsageError(
                    f"{item.nodeid}: needs({mark.args[0]!r}): not one of {sorted(NEEDS)}"
                )
        reason = unmet_need(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def unmet_need(node: pytest.Item) -> str | None:
    """Why `node` cannot run in this process (a `needs` primitive absent or
    hidden), or None. Asked again per call: a variant changes the answer."""
    for mark in node.iter_markers("needs"):
        reason = NEEDS[mark.args[0]]()
        if reason is not None:
            return f"needs {mark.args[0]}: {reason}"
    return None


# -- the same tests on another path (docs/decisions/portability.md) -----------------
#
# The tests of these folders and files run once more per variant, in the same
# run: the pure-Python path beside the optional C modules, and the portable
# fallbacks a Linux machine would otherwise never take. Each variant is the
# switch production code reads (CTINDEX_PURE, CTINDEX_SIMULATE), set for the
# test's process and every process it starts, with the process's decisions
# taken again (platform_features.reset, native.reset, native_modules.reset).
# Only the tests that exercise a path the variant changes are listed: a rerun
# of the whole suite would cost its full time once more for each variant.
PLAIN = "plain"  # the platform as it is
VARIANTS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    # Every module with a C twin, and the tools that compare whole answers.
    "pure": (
        {"CTINDEX_PURE": "1"},
        (
            "ctindex/reconciler/",
            "ctindex/store/",
            "ctindex/providers/",
            "ctindex/indexing/",
            "ctindex/search/",
            "ctindex/commands/test_verify.py",
            "e2e/test_fresh_fingerprints.py",
            "e2e/test_differential.py",
        ),
    ),
    # Windows' walk: folders by path, no O_DIRECTORY, no folder fsync.
    "no-dir-fd": (
        {"CTINDEX_SIMULATE": "no-dir-fd"},
        (
            "ctindex/reconciler/",
            "ctindex/base/test_durable",
            "ctindex/policy/test_store_path",
            "ctindex/store/test_generation",
            "ctindex/store/test_writer",
            "ctindex/indexing/test_transaction",
            "ctindex/commands/test_verify.py",
            "e2e/test_differential.py",
            "e2e/test_fresh_fingerprints.py",
            "e2e/test_fresh_links_mounts.py",
            "e2e/test_robust_store_path.py",
            "e2e/test_robust_storage.py",
        ),
    ),
    # macOS without getpeereid, and Windows: the daemon is disabled by
    # design, so every query reconciles itself.
    "no-peercred": (
        {"CTINDEX_SIMULATE": "no-peercred"},
        (
            "ctindex/ipc/test_peer.py",
            "ctindex/query/test_freshness.py",
            "ctindex/test_api.py",
            "ctindex/test_fast_entry.py",
            "e2e/test_first_run.py",
            "e2e/test_differential.py",
        ),
    ),
}
# Files that hold a C module and its pure twin to each other themselves (by
# name: test_native*.py, test_*_native*.py, and the batch read below): a
# variant would run both halves again, or hide the C half they compare,
# since they decide at import whether it is there.
COMPARE_BOTH_PATHS = ("ctindex/reconciler/test_capture_batch.py",)
TESTS = REPO / "tests"


def variants_of(path: Path) -> list[str]:
    """The variants a test file runs in besides the plain platform."""
    rel = path.resolve().relative_to(TESTS).as_posix()
    if rel in COMPARE_BOTH_PATHS or "native" in path.stem.split("_"):
        return []
    return [name for name, (_, where) in VARIANTS.items() if rel.startswith(where)]


def _decide_again() -> None:
    """Forget what this process decided from the switches."""
    from ctindex.base import native_modules
    from ctindex.reconciler import native, platform_features

    platform_features.reset()
    native.reset()
    native_modules.reset()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = variants_of(metafunc.definition.path)
    if names:
        metafunc.parametrize("platform_variant", [PLAIN, *names], indirect=True)


@pytest.fixture(autouse=True)
def platform_variant(request: pytest.FixtureRequest) -> Iterator[str]:
    """The variant this test runs in (``plain`` unless VARIANTS lists its
    file). Autouse, so it is set before the test's other function fixtures
    start a daemon or a process."""
    name: str = getattr(request, "param", PLAIN)
    if name == PLAIN:
        yield name
        return
    switches = VARIANTS[name][0]
    saved = {key: os.environ.get(key) for key in switches}
    os.environ.update(switches)
    _decide_again()
    try:
        reason = unmet_need(request.node)
        if reason is not None:
            pytest.skip(reason)
        yield name
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _decide_again()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Captured output that holds a lone surrogate (a test of undecodable
    names logs one) is kept visible as an escape: pytest-xdist sends reports
    between processes as UTF-8 and would otherwise stop the worker."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, text in report.sections
    ]
