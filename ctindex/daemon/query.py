"""The daemon's half of the query path (docs/daemon.md "Query path").

A `search` request carries the client's command-line words, working folder
and build id (ctindex/fast_entry.py). The loop (ctindex/daemon/lifecycle.py)
checks build, plan and watcher trust, runs the barrier for it as for any
client, and then hands the query to the one worker thread here, which runs
the CLI's own `main()` with `answer=` set: the same argument parsing, query
parser, `search` command and output code as the in-process path, so stdout,
stderr and exit code are those bytes by construction. The only difference
is where the fresh answer comes from: the generation this daemon holds open
(reopened only when MANIFEST changed, ctindex/store/snapshot.py
OpenGeneration) instead of a barrier over the socket.

Bounds (docs/reliability.md "Query path"):

* The loop never waits for a query: the worker hands back its answer
  through the wake socket. It holds the GIL at most one switch interval
  (SLICE_S) at a time while the worker computes, so events, barriers and the
  heartbeat are served between slices.
* One query at a time; another one meanwhile is declined ("daemon busy")
  and answered by its own process. A query not done within QUERY_BUDGET_S
  is declined the same way (the worker's late answer is dropped).
* Answers larger than MAX_OUTPUT characters are declined (never buffered
  twice). What is kept between queries is capped and belongs to the open
  generation: its cached dictionary blocks (CACHE_BLOCKS), and the outcomes
  of recent queries (OUTCOMES entries of at most OUTCOME_RESULTS results;
  the same query on the same generation has the same outcome, and only the
  freshness around it is made anew). The heartbeat's RSS check against the
  `status` ceiling covers all of it.

Declining is always safe: the client then runs the in-process path with its
own barrier and freshness rules (ctindex/query/freshness.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    import argparse

    from ctindex.daemon.server import Connection
    from ctindex.ipc.protocol import SearchResult
    from ctindex.policy.project import Project
    from ctindex.search.execute import Outcome
    from ctindex.search.query import Node
    from ctindex.store.snapshot import Snapshot

QUERY_BUDGET_S = 2.0  # ctindex/fast_entry.py waits this long beyond the barrier budget
SLICE_S = 0.005  # sys.setswitchinterval: the longest the worker keeps the loop waiting
MAX_OUTPUT = 8 << 20  # characters of stdout + stderr; the client takes 64 MiB of JSON
CACHE_BLOCKS = 2048  # dictionary blocks (64 terms each) kept open between queries
# Records, token streams and parsed records the segments keep between
# queries: per segment, and in all. Small: the daemon's memory is counted per
# indexed file (docs/benchmarks.md), and a repeated query is kept whole anyway.
KEEP_BYTES = 256 << 10
CACHE_BYTES = 1 << 20
# Outcomes of the open generation by (query, limit): deterministic for one
# generation, dropped with it. Capped in entries and in results per entry
# (a --paths listing of every match is not kept).
OUTCOMES = 64
OUTCOME_RESULTS = 100


class Answer(NamedTuple):
    """A search answered here: the outcome read from the generation the
    barrier vouched for, which the CLI states as a plain watcher-clean
    answer (ctindex/cli.py `daemon_search`)."""

    generation: int  # the barrier's
    barrier_ms: float
    outcome: Outcome


# A search's answer made here, for the CLI's `search` to print with its own
# code so the bytes are the same: (the project its words named, the parsed
# query, the limit) -> the answer.
DaemonAnswer = Callable[["Project", "Node", int], Answer]


class SearchCommand(NamedTuple):
    """The CLI's `search`, handed in by whoever starts the daemon
    (ctindex/daemon/__main__.py, `watch start --foreground`: ctindex/cli.py
    `daemon_search`), so that the daemon's answer is the in-process one byte
    for byte without the daemon importing the CLI above it."""

    # The CLI's parser on the client's words; SystemExit for words it refuses.
    parse: Callable[[list[str]], argparse.Namespace]
    # The CLI's main: (words, stdout, stderr, working folder, the fresh
    # answer to print) -> exit code.
    run: Callable[[list[str], TextIO, TextIO, str, DaemonAnswer], int]
    # The answer as data, as the CLI's `--json` states it (sent beside the
    # text: docs/decisions/daemon-answers.md).
    data: Callable[[Project, Answer], SearchResult]


class Declined(Exception):
    """This query is not answered here; the client answers it itself."""


class Job:
    """One search between the loop and the worker."""

    __slots__ = (
        "argv",
        "barrier_ms",
        "code",
        "conn",
        "cwd",
        "deadline",
        "declined",
        "digest",
        "generation",
        "identity",
        "late",
        "result",
        "stderr",
        "stdout",
    )

    def __init__(
        self,
        conn: Connection,
        argv: list[str],
        cwd: str,
        digest: str,
        generation: int,
        identity: str,
        barrier_ms: float,
        deadline: float,
    ) -> None:
        self.conn = conn
        self.argv = argv
        self.cwd = cwd
        self.digest = digest  # the plan the barrier was made under
        self.generation = generation  # the barrier's: the answer reads this or newer
        self.identity = identity  # its manifest's (store/generation.py manifest_identity)
        self.barrier_ms = barrier_ms
        self.deadline = deadline
        self.stdout = ""
        self.stderr = ""
        self.code = 0
        self.result: SearchResult | None = None  # the answer as data, beside its text
        self.declined: str | None = None
        self.late = False  # the loop declined it at its deadline: drop the result


class QueryService:
    """The worker thread and what it keeps between queries."""

    def __init__(
        self,
        root: Path,
        index_dir: Path,
        wake: Callable[[], None],
        command: SearchCommand | None = None,
    ) -> None:
        from ctindex.store.snapshot import OpenGeneration

        self.root = os.fspath(root)
        self._command = command  # None: every search is declined, the client answers it
        self._open = OpenGeneration(index_dir, KEEP_BYTES)  # used by the worker thread only
        self._outcomes: dict[tuple[Node, int], Outcome] = {}  # of self._open.snap
        self._outcomes_of = 0  # the `opened` count they belong to
        self._wake = wake
        self._lock = threading.Lock()
        self._todo = threading.Condition(self._lock)
        self._queued: Job | None = None
        self._running: Job | None = None
        self._done: list[Job] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.answered = 0
        self.declined = 0
        self.last_declined: str | None = None  # why (status detail)
        self.computed = 0  # outcomes computed (the others came from the capped cache)

    # -- loop side ---------------------------------------------------------------

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._queued is not None or self._running is not None

    def submit(self, job: Job) -> None:
        with self._lock:
            self._queued = job
            self._todo.notify()
        if self._thread is None:
            sys.setswitchinterval(SLICE_S)  # the default today; stated, not assumed
            self._thread = threading.Thread(target=self._work, name="ctindex-query", daemon=True)
            self._thread.start()

    def finished(self, now: float) -> list[Job]:
        """Jobs to answer now: done ones, and ones past their budget
        (declined "slow query"; the worker's late result is dropped)."""
        with self._lock:
            done, self._done = self._done, []
            for job in (self._queued, self._running):
                if job is not None and job.deadline <= now and not job.late:
                    job.late = True
                    done.append(job)
            if self._queued is not None and self._queued.late:
                self._queued = None
        return [j for j in done if not j.conn.closed]

    def deadline(self) -> float | None:
        with self._lock:
            job = self._running or self._queued
            return job.deadline if job is not None and not job.late else None

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._todo.notify()

    def status(self) -> dict[str, int | str | None]:
        return {
            "answered": self.answered,
            "declined": self.declined,
            "last_declined": self.last_declined,
            "computed": self.computed,
            "cached": len(self._outcomes),
        }

    # -- worker side -------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._lock:
                while self._queued is None and not self._stopping:
                    self._todo.wait()
                if self._stopping:
                    self._open.close()
                    return
                job, self._queued = self._queued, None
                self._running = job
            assert job is not None
            result = self._run(job)
            with self._lock:
                self._running = None
                if not job.late:  # else the loop declined it already
                    job.stdout, job.stderr, job.code, job.declined = result
                    self._done.append(job)
            self._wake()

    def _run(self, job: Job) -> tuple[str, str, int, str | None]:
        """(stdout, stderr, exit code, why declined or None)."""
        try:
            out, err, code = self._search(job)
        except Declined as why:
            return "", "", 0, str(why)
        except BaseException as exc:  # never the loop's problem: the client answers itself
            return "", "", 0, f"daemon error: {type(exc).__name__}"
        finally:
            self._cap()
        if len(out) + len(err) > MAX_OUTPUT:
            return "", "", 0, "answer too large"
        return out, err, code, None

    def _search(self, job: Job) -> tuple[str, str, int]:
        command = self._command
        if command is None:
            raise Declined("no search command")
        # The CLI's parser decides what the words mean; help, usage errors
        # (their text depends on the terminal) and --direct are the client's.
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                args = command.parse(job.argv)
        except SystemExit:
            raise Declined("usage") from None
        if args.command != "search" or args.direct or args.version:
            raise Declined("not an indexed search")
        out, err = io.StringIO(), io.StringIO()

        def answer(project: Project, node: Node, limit: int) -> Answer:
            return self._answer(job, project, node, limit)

        code = command.run(job.argv, out, err, job.cwd, answer)
        return out.getvalue(), err.getvalue(), code

    def _answer(self, job: Job, project: Project, node: Node, limit: int) -> Answer:
        """The fresh answer of the plan-less fast path (ctindex/query/freshness.py,
        the same Vouched check), from the generation held open."""
        from ctindex.search.execute import Vouched
        from ctindex.store.durable import IndexCorrupt, fault

        if os.fspath(project.root) != self.root:
            raise Declined("another project")  # the words named another folder (-C)
        try:
            snap = self._open.current()
            if not Vouched(job.digest, job.generation, job.identity).matches(snap):
                raise Declined("not the generation the barrier vouched for")
            outcome = self._outcome(snap, node, limit)
            fault("daemon-query")  # tests: the daemon dies with the answer unsent
        except (IndexCorrupt, OSError) as exc:
            self._open.close()
            raise Declined(f"index unreadable: {exc}") from None  # the client repairs it
        # The generation printed is the one read (ctindex/service/search.py finish).
        answer = Answer(job.generation, job.barrier_ms, outcome)
        if self._command is not None and len(outcome.results) <= OUTCOME_RESULTS:
            job.result = self._command.data(project, answer)
        return answer

    def _outcome(self, snap: Snapshot, node: Node, limit: int) -> Outcome:
        from ctindex.search.execute import search_snapshot

        if self._outcomes_of != self._open.opened:  # another generation: forget all
            self._outcomes, self._outcomes_of = {}, self._open.opened
        key = (node, limit)
        got = self._outcomes.pop(key, None)
        if got is None:
            got = search_snapshot(snap, node, limit)
            self.computed += 1
        if len(got.results) <= OUTCOME_RESULTS:
            self._outcomes[key] = got  # most recent last
            while len(self._outcomes) > OUTCOMES:
                del self._outcomes[next(iter(self._outcomes))]
        return got

    def _cap(self) -> None:
        snap = self._open.snap
        if snap is None:
            return
        blocks = sum(v.segment.cached_blocks for v in snap.views)
        kept = sum(v.segment.kept_bytes for v in snap.views)
        if blocks > CACHE_BLOCKS or kept > CACHE_BYTES:
            for v in snap.views:
                v.segment.forget_blocks()
