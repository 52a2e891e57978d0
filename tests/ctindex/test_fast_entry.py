"""The query path: `ctindex search` answered by the daemon (ctindex/fast_entry.py,
ctindex/daemon/query.py, docs/daemon.md "Query path").

Required: the daemon's answer is byte for byte the in-process answer (text
and JSON, exit codes, errors), a daemon of other code never answers, a
config change between two searches is honoured, a daemon killed mid-query
leaves a correct fallback answer, the generation named is the one read
(also after an outside `rebuild`), and the client imports nothing heavy.
Results are checked against the independent oracle (tests/oracle.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctindex.client.daemon_requests import BUILD_MISMATCH, request
from tests import oracle
from tests.conftest import cli_main, copy_package
from tests.daemon_support import CliProject, wait_for
from tests.terminal import run_on_terminal

Make = Callable[..., CliProject]
MARKER = "zqxv7marker"
HANG_GUARD_S = 60.0  # only a hang guard for subprocesses and waits
REPO = Path(__file__).resolve().parents[2]


def _ctindex(
    root: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """A real `python -m ctindex` process started in the project (bytes)."""
    return subprocess.run(
        [sys.executable, "-m", "ctindex", *args],
        cwd=cwd or root,
        env=env,
        capture_output=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def _queries(project: CliProject) -> dict[str, Any]:
    reply = request(project.paths, {"op": "status"}, 2.0)
    got: dict[str, Any] = reply["status"]["queries"]
    return got


def _untimed(data: bytes) -> bytes:
    """Only the barrier's duration differs between two answers."""
    data = re.sub(rb"barrier \d+\.\d ms", b"barrier X ms", data)
    return re.sub(rb'"barrier_ms": [0-9.e-]+', b'"barrier_ms": 0', data)


def _clean_daemon(make: Make, **config: Any) -> CliProject:
    project = make(config=config or None)
    metrics = project.root / "acme_retail" / "metrics"
    (metrics / "marker-one.md").write_text(f"# Marker one\n\n{MARKER} in a metric.\n")
    (metrics / "marker-two.md").write_text(
        "---\ntype: Metric\ntags: [zqxv7tag]\n---\n# Marker two\n\n"
        f"Another {MARKER}, gross margin.\n"
    )
    project.cli("search", "margin")  # starts the daemon
    project.wait_daemon()
    _answered_by_daemon(project, "search", MARKER)  # the record and the pass are settled
    return project


def _answered_by_daemon(project: CliProject, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run a search process and require that the daemon answered it."""

    def attempt() -> subprocess.CompletedProcess[bytes] | None:
        before = _queries(project)["answered"]
        done = _ctindex(project.root, *args)
        return done if _queries(project)["answered"] == before + 1 else None

    done: subprocess.CompletedProcess[bytes] = wait_for(attempt, HANG_GUARD_S, 0.1)
    return done


def _in_process(project: CliProject, *args: str) -> tuple[bytes, bytes, int]:
    got = cli_main(*args, cwd=project.root)
    return (
        got.out.encode("utf-8", "surrogateescape"),
        got.err.encode("utf-8", "surrogateescape"),
        got.code,
    )


CASES = [
    ("term", ["search", "margin"]),
    ("phrase", ["search", '"gross margin"']),
    ("prefix", ["search", "marg*"]),
    ("filter", ["search", "type:Metric", "margin"]),
    ("filter-only", ["search", "tag:zqxv7tag"]),
    ("marker", ["search", MARKER, "--limit", "1000"]),
    ("no-hit", ["search", "zqxv7absent"]),
    ("bad-query", ["search", '"unterminated']),
    ("bad-filter", ["search", "type:"]),
    ("paths", ["search", "margin", "--paths"]),
    ("ids-quiet", ["-q", "search", "margin", "--ids"]),
    ("limit", ["search", "margin", "OR", "revenue", "--limit", "2"]),
    ("paths-json", ["--json", "search", "margin", "--paths"]),  # a usage error (exit 2)
    ("markers", ["search", "margin", "--markers", "[[,]]"]),
    ("colour", ["search", "margin", "--color=always"]),
]


def test_daemon_answer_is_byte_for_byte_the_in_process_answer(make_cli_project: Make) -> None:
    project = _clean_daemon(make_cli_project)
    for name, args in CASES:
        for words in (args, ["--json", *args]) if "--json" not in args else (args,):
            done = _answered_by_daemon(project, *words)
            out, err, code = _in_process(project, *words)
            assert (done.returncode, _untimed(done.stdout), _untimed(done.stderr)) == (
                code,
                _untimed(out),
                _untimed(err),
            ), (name, words)
            if "--json" in words and code in (0, 1):
                fresh = json.loads(done.stdout)["freshness"]
                assert fresh["mode"] == "watcher-clean", (name, fresh)
                assert fresh["barrier_ms"] is not None
    # And the answers are the oracle's.
    doc = json.loads(
        _answered_by_daemon(project, "--json", "search", MARKER, "--limit", "1000").stdout
    )
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)


def test_a_daemon_answer_on_a_terminal_is_coloured_as_in_process(make_cli_project: Make) -> None:
    """The daemon writes into a buffer, not the terminal: the client decides
    the colour (ctindex/base/tty.py) and the daemon's answer is the in-process
    answer with that decision."""
    project = _clean_daemon(make_cli_project)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    command = [sys.executable, "-m", "ctindex", "search", "margin"]

    def on_terminal(extra_env: dict[str, str]) -> str | None:
        before = _queries(project)["answered"]
        code, out, _ = run_on_terminal(command, {**env, **extra_env}, str(project.root))
        assert code == 0
        return out if _queries(project)["answered"] == before + 1 else None

    coloured = wait_for(lambda: on_terminal({}), HANG_GUARD_S, 0.1)
    expected = _in_process(project, "search", "margin", "--color=always")[0].decode()
    assert "\x1b[" in coloured and _untimed(coloured.encode()) == _untimed(expected.encode())
    plain = wait_for(lambda: on_terminal({"NO_COLOR": "1"}), HANG_GUARD_S, 0.1)
    assert "\x1b[" not in plain and "«" in plain


def test_text_names_the_barrier_time_of_a_watcher_clean_answer(make_cli_project: Make) -> None:
    project = _clean_daemon(make_cli_project)
    line = _answered_by_daemon(project, "search", MARKER).stdout.splitlines()[-1]
    assert re.fullmatch(
        rb"2 of 2 matches \xc2\xb7 generation \d+ \xc2\xb7 watcher-clean, "
        rb"barrier \d+\.\d ms",
        line,
    ), line


def test_from_another_folder_with_C(make_cli_project: Make, tmp_path: Path) -> None:
    project = _clean_daemon(make_cli_project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    words = ["-C", os.fspath(project.root), "--json", "search", MARKER]
    before = _queries(project)["answered"]
    done = _ctindex(project.root, *words, cwd=elsewhere)
    assert _queries(project)["answered"] == before + 1
    doc = json.loads(done.stdout)
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)


# -- builds ---------------------------------------------------------------------------


def _build(target: Path, *, poison: bool = False, edit: bool = False) -> Path:
    copy_package(target)
    query = target / "ctindex" / "daemon" / "query.py"
    if poison:  # this build's daemon would print what no in-process search prints
        text = query.read_text()
        old = "        return out.getvalue(), err.getvalue(), code\n"
        assert old in text
        query.write_text(text.replace(old, '        return "POISON\\n", "", code\n'))
    if edit:
        with open(query, "a", encoding="utf-8") as fh:
            fh.write("\n# another build\n")
    return target


def test_a_daemon_of_other_code_never_answers(make_cli_project: Make, tmp_path: Path) -> None:
    poisoned = _build(tmp_path / "a", poison=True)
    other = _build(tmp_path / "b", edit=True)
    project = make_cli_project()
    (project.root / "ga4" / "marker.md").write_text(f"# M\n\n{MARKER}\n")
    env_a = {**os.environ, "PYTHONPATH": os.fspath(poisoned)}
    env_b = {**os.environ, "PYTHONPATH": os.fspath(other)}
    _ctindex(project.root, "search", "margin", env=env_a)
    project.wait_daemon()
    # The poisoned daemon does answer its own build (the path is live)...
    wait_for(
        lambda: _ctindex(project.root, "search", MARKER, env=env_a).stdout == b"POISON\n",
        HANG_GUARD_S,
        0.1,
    )
    # ...and never a client of other code: that one answers in process.
    done = _ctindex(project.root, "--json", "search", MARKER, env=env_b)
    assert b"POISON" not in done.stdout
    doc = json.loads(done.stdout)
    assert doc["freshness"]["mode"] == "fallback"
    assert doc["freshness"]["reason"].startswith(BUILD_MISMATCH)
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)


# -- plan -----------------------------------------------------------------------------


def test_a_config_change_between_two_searches_is_honoured(make_cli_project: Make) -> None:
    project = _clean_daemon(make_cli_project)
    (project.root / "ga4" / "ga4-marker.md").write_text(f"# G\n\n{MARKER} in ga4.\n")
    everywhere = oracle.containing(project.root, MARKER)
    doc = json.loads(
        _answered_by_daemon(project, "--json", "search", MARKER, "--limit", "1000").stdout
    )
    assert {r["path"] for r in doc["results"]} == everywhere
    assert any(p.startswith("ga4/") for p in everywhere)
    # Only acme_retail is a scope now; the very next search must know it.
    from tests.daemon_support import TEST_CONFIG

    project.write_config(
        {**TEST_CONFIG, "scopes": [{"root": "acme_retail", "provider": "okf-markdown"}]}
    )
    done = _ctindex(project.root, "--json", "search", MARKER, "--limit", "1000")
    doc = json.loads(done.stdout)
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)
    assert not any(r["path"].startswith("ga4/") for r in doc["results"])


# -- a daemon dying or stopped ------------------------------------------------------


@pytest.mark.needs("peercred")
def test_a_daemon_killed_mid_query_leaves_a_correct_fallback_answer(make_cli_project: Make) -> None:
    """The daemon dies (os._exit, as SIGKILL) inside the query, after it read
    the index and before it answered (ctindex/store/durable.py fault points)."""
    project = make_cli_project()
    metrics = project.root / "acme_retail" / "metrics"
    (metrics / "marker-one.md").write_text(f"# Marker one\n\n{MARKER} in a metric.\n")
    # The second query the daemon answers is its last.
    started = _ctindex(
        project.root, "watch", "start", env={**os.environ, "CTINDEX_FAULT": "daemon-query:2"}
    )
    assert started.returncode == 0, started.stderr
    pid = project.wait_daemon()["pid"]
    _answered_by_daemon(project, "search", "margin")  # the path is live
    done = _ctindex(project.root, "--json", "search", MARKER, "--limit", "1000")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: pid not in project.daemon_pids(), HANG_GUARD_S)  # it did die
    doc = json.loads(done.stdout)
    assert doc["freshness"]["mode"] == "fallback", doc["freshness"]
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)
    assert doc["freshness"]["generation"] == _manifest_generation(project)


def test_a_stopped_daemon_costs_a_bounded_wait_then_a_fallback(make_cli_project: Make) -> None:
    project = _clean_daemon(make_cli_project, barrier_timeout_ms=200)
    pid = project.status()["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        done = _ctindex(project.root, "--json", "search", MARKER, "--limit", "1000")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["freshness"]["mode"] == "fallback", doc["freshness"]
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)


# -- generations ----------------------------------------------------------------------


def _manifest_generation(project: CliProject) -> int:
    raw = (project.root / ".ct" / "okf" / "MANIFEST").read_bytes().rpartition(b"\ncrc32:")[0]
    return int(json.loads(raw)["generation"])


@pytest.mark.parametrize("writer", ["rebuild", "update"])
@pytest.mark.slow
def test_after_an_outside_writer_the_next_search_names_the_generation_it_read(
    make_cli_project: Make, writer: str
) -> None:
    project = _clean_daemon(make_cli_project)
    before = _manifest_generation(project)
    if writer == "update":  # a change the outside `update` publishes first
        (project.root / "ga4" / "new.md").write_text(f"# New\n\n{MARKER} too.\n")
    done = _ctindex(project.root, writer)
    assert done.returncode == 0, done.stderr
    published = _manifest_generation(project)
    assert published > before
    for words in (["--json", "search", MARKER], ["search", MARKER]):
        out = _answered_by_daemon(project, *words).stdout
        if words[0] == "--json":
            doc = json.loads(out)
            assert doc["freshness"]["generation"] == _manifest_generation(project)
            assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)
        else:
            assert f"generation {_manifest_generation(project)} ".encode() in out
    assert _manifest_generation(project) >= published


# -- the client ----------------------------------------------------------------------


HEAVY = (
    "argparse",
    "ctindex.cli",
    "ctindex.policy.plan",
    "ctindex.policy.config",
    # the in-process client (its ctindex.client.unanswered is the fast path's too)
    "ctindex.client.daemon_requests",
    "ctindex.client.spawn",
    "ctindex.client.control",
    "ctindex.search",
    "ctindex.store",
    "ctindex.policy.plan_record",
    "ctindex.policy.project",
    "typing",
    "pathspec",
    "json5",
)


def test_a_daemon_answered_search_imports_nothing_heavy(make_cli_project: Make) -> None:
    project = _clean_daemon(make_cli_project)

    def imported() -> set[str] | None:
        before = _queries(project)["answered"]
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "ctindex", "search", MARKER],
            cwd=project.root,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )
        if _queries(project)["answered"] != before + 1:
            return None
        return {
            line.rpartition("|")[2].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        }

    names: set[str] = wait_for(imported, HANG_GUARD_S, 0.1)
    heavy = {n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY)}
    assert not heavy, sorted(heavy)


def test_the_client_waits_as_long_as_the_daemon_may_work() -> None:
    from ctindex import fast_entry
    from ctindex.daemon import query

    assert fast_entry.QUERY_BUDGET_S == query.QUERY_BUDGET_S
    assert fast_entry.MAX_REPLY > 6 * query.MAX_OUTPUT  # \udcXX escapes: 6 bytes a character


def test_no_daemon_means_todays_path(make_cli_project: Make) -> None:
    """CI mode starts no daemon: the search is answered in process, correctly."""
    project = make_cli_project()
    (project.root / "ga4" / "marker.md").write_text(f"# M\n\n{MARKER}\n")
    env = {**os.environ, "CI": "true"}
    done = _ctindex(project.root, "--json", "search", MARKER, env=env)
    doc = json.loads(done.stdout)
    assert doc["freshness"]["mode"] == "fallback"
    assert {r["path"] for r in doc["results"]} == oracle.containing(project.root, MARKER)
    assert not project.daemon_pids()


def test_a_change_between_two_daemon_answers_is_seen(make_cli_project: Make) -> None:
    """The same query twice around a change: the second answer reads the new
    generation (the outcome cache belongs to the generation it was read from)."""
    project = _clean_daemon(make_cli_project)
    words = ("--json", "search", MARKER, "--limit", "1000")
    first = json.loads(_answered_by_daemon(project, *words).stdout)
    copy = project.root / "ga4" / "copied.md"
    shutil.copy2(project.root / "acme_retail" / "metrics" / "marker-one.md", copy)  # cp -p
    second = json.loads(_answered_by_daemon(project, *words).stdout)
    assert {r["path"] for r in second["results"]} == oracle.containing(project.root, MARKER)
    assert "ga4/copied.md" in {r["path"] for r in second["results"]}
    assert second["freshness"]["generation"] > first["freshness"]["generation"]
    assert second["freshness"]["generation"] == _manifest_generation(project)


def test_the_daemons_query_caches_are_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.daemon import query
    from ctindex.search.query import parse_query
    from tests.conftest import copy_bundles, write_config

    root = copy_bundles(tmp_path / "p")
    write_config(root, "okf/bundles/acme_retail", watch=False)
    assert cli_main("-C", str(root), "update").code == 0
    service = query.QueryService(root, root / ".ct" / "okf", lambda: None)
    snap = service._open.current()
    for i in range(query.OUTCOMES * 2):
        service._outcome(snap, parse_query(f"margin OR zqxv{i}"), 10)
    assert len(service._outcomes) == query.OUTCOMES
    assert service.computed == query.OUTCOMES * 2
    service._outcome(snap, parse_query("margin OR zqxv127"), 10)  # the newest: kept
    assert service.computed == query.OUTCOMES * 2
    monkeypatch.setattr(query, "OUTCOME_RESULTS", 2)
    service._outcome(snap, parse_query("a* OR e* OR i*"), 1 << 62)  # a long listing
    assert (parse_query("a* OR e* OR i*"), 1 << 62) not in service._outcomes
    assert sum(v.segment.cached_blocks for v in snap.views) > 0
    monkeypatch.setattr(query, "CACHE_BLOCKS", 0)
    service._cap()
    assert sum(v.segment.cached_blocks for v in snap.views) == 0
    # What the segments keep of records and token streams is capped in all too.
    service._outcome(snap, parse_query('"gross margin" OR revenue'), 10)
    assert sum(v.segment.kept_bytes for v in snap.views) > 0
    monkeypatch.setattr(query, "CACHE_BLOCKS", 1 << 30)
    monkeypatch.setattr(query, "CACHE_BYTES", 0)
    service._cap()
    assert sum(v.segment.kept_bytes for v in snap.views) == 0
    service._open.close()


def test_a_slow_query_never_holds_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's side of the worker only hands over and collects: with the
    worker stuck inside a query, submitting returned, a second query is
    refused as busy, and past its budget the query is declined ("slow
    query") and its late result dropped."""
    import threading

    from ctindex.daemon import query

    release, inside = threading.Event(), threading.Event()

    def stuck(self: query.QueryService, job: query.Job) -> tuple[str, str, int]:
        inside.set()
        release.wait(HANG_GUARD_S)
        return "late\n", "", 0

    monkeypatch.setattr(query.QueryService, "_search", stuck)
    pokes: list[int] = []
    service = query.QueryService(tmp_path, tmp_path / ".ct" / "okf", lambda: pokes.append(1))

    class Conn:
        closed = False

    job = query.Job(Conn(), ["search", "x"], str(tmp_path), "digest", 1, "", 0.5, deadline=100.0)
    service.submit(job)  # returns at once: the worker runs the query
    assert inside.wait(HANG_GUARD_S)
    assert service.busy and service.finished(now=50.0) == []
    assert service.deadline() == 100.0
    late = service.finished(now=100.0)
    assert late == [job] and job.late  # the loop declines it now
    assert service.deadline() is None
    release.set()
    wait_for(lambda: not service.busy, HANG_GUARD_S)
    assert service.finished(now=200.0) == [] and job.stdout == ""  # the late result dropped
    assert pokes  # the worker woke the loop
    service.stop()


class _Unwritable:
    """A stdout whose every write fails with `exc` (no descriptor behind it)."""

    def __init__(self, exc: OSError) -> None:
        self.exc = exc

    def reconfigure(self, **_options: object) -> None:
        pass

    def write(self, _text: str) -> int:
        raise self.exc

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation("no descriptor")


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (BrokenPipeError(32, "Broken pipe"), "Broken pipe"),
        (OSError(28, "No space left on device"), "No space left on device"),
    ],
    ids=["broken-pipe", "full"],
)
def test_a_daemon_answer_stdout_cannot_take_is_exit_74_and_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exc: OSError, reason: str
) -> None:
    """The fast path prints the daemon's answer itself: a broken pipe is the
    same exit 74 and line as a full disk (ctindex/base/streams.py), after
    the answer's own stderr."""
    from ctindex import fast_entry

    monkeypatch.setattr(sys, "stdout", _Unwritable(exc))
    answer: Any = {"stdout": "1 hit\n", "stderr": "ctindex: a note\n", "code": 0}
    assert fast_entry._print(answer) == 74
    assert capsys.readouterr().err == (
        f"ctindex: a note\nctindex: cannot write the output: {reason}\n"
    )


def test_the_daemon_sends_its_answer_as_data_beside_the_text(make_cli_project: Make) -> None:
    """The typed result beside the rendered text (docs/decisions/daemon-answers.md):
    the `--json` document's own results, in the API's order."""
    import ctindex
    from ctindex import fast_entry

    project = _clean_daemon(make_cli_project)

    def ask(*argv: str) -> Any:
        request = {"op": "search", "argv": list(argv), "cwd": os.fspath(project.root)}
        return fast_entry._ask(project.paths, request, 10.0)

    for query, limit in (("margin", 10), (f"margin OR {MARKER}", 3)):
        words = ["search", query, "--limit", str(limit)]
        answered = wait_for(lambda w=words: ask("--json", *w), HANG_GUARD_S, 0.1)
        document = json.loads(answered["stdout"])
        data = answered["result"]
        assert data is not None and data["results"]
        assert data == {k: v for k, v in document.items() if k != "query"}
        text = wait_for(lambda w=words: ask(*w), HANG_GUARD_S, 0.1)
        assert text["result"]["results"] == data["results"]  # whatever the words render
        with ctindex.Index(project.root) as index:
            hits = index.search(query, limit=limit).hits
        assert [r["ref"] for r in data["results"]] == [h.ref for h in hits]
