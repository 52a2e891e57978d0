"""Updates and rebuilds asked through the share, run by the share's host
(docs/network-shares.md, "Writers on other hosts").

A client on another host that runs `ctindex update` or `rebuild` on the
share renames a request into `.ct/okf/barrier/` (ctindex/client/share.py);
ctindex/daemon/share_barrier.py checks it and hands it here. Each run is
`ctindex --json update` (or `rebuild`) in a child process on this host,
exactly what a user would run here: it takes the index's local update lock
(one writer with this daemon's passes and any other writer on the host),
publishes atomically and prints the report this module turns into the
answer. A child and not this loop, because a long rebuild must not stop the
loop: heartbeats, barriers through the socket and through the share, and
the progress records below go on while it runs.

* One run at a time. A request that arrives while a run is under way waits
  for the next run of its op, which starts after it was made (so it covers
  every change that reached the server before the request); every request
  of that op waiting by then is answered by that one run. A flood of
  requests therefore costs at most one run per op after the current one.
* Every beat, each waiting request's file is rewritten with a progress
  record (WORKING, its state and a beat counter): the client waits while
  the counter moves. A file that is gone means its client gave up (Ctrl-C):
  a request not started is dropped; a run under way finishes, unanswered.
* A run is stopped past WRITE_LIMIT_S, and at the daemon's exit (SIGINT,
  then SIGKILL after STOP_WAIT_S): an interrupted `update` publishes
  nothing, so the index is never half written.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ctindex.daemon.share_barrier import Logger, ShareHost, ShareRequest
from ctindex.ipc.share_channel import LOCAL_WRITES_ENV, WORKING, WRITE_LIMIT_S, pad

RUN_KEY = "share-run"  # the selector key of a run's output
OUTPUT_MAX = 1 << 20  # bytes of a run's report kept (a report is a few hundred)
STOP_WAIT_S = 5.0
# Keys of `update --json` that judge or describe the run for its own caller,
# not the index: the client computes its own (its --strict, its problems).
NOT_REPORTED = ("problems", "strict", "exit_code", "no_scopes")
TRIMMED = ("notes", "missing_roots")  # lists shortened when an answer would not fit


@dataclass
class Run:
    op: str
    requests: list[ShareRequest]
    proc: subprocess.Popen[bytes]
    started: float
    output: bytearray = field(default_factory=bytearray)


class ShareUpdates:
    def __init__(
        self,
        host: ShareHost,
        root: Path,
        sel: selectors.BaseSelector,
        clock: Callable[[], float],
        done: Callable[[], dict[str, object]],
        log: Logger | None = None,
        limit_s: float = WRITE_LIMIT_S,
    ) -> None:
        self.host = host
        self.root = root
        self.sel = sel
        self.clock = clock
        # Called after each run: the published generation as the daemon now
        # vouches for it ({generation, identity, plan}; {"error"} if unreadable).
        self.done = done
        self.log = log
        self.limit_s = limit_s
        self.queued: dict[str, list[ShareRequest]] = {}  # op -> its next run's requests
        self.running: Run | None = None
        self.beats = 0
        self.runs = 0

    @property
    def busy(self) -> bool:
        return self.running is not None or bool(self.queued)

    def add(self, req: ShareRequest) -> None:
        """A checked request: queued, told so at once, run when its turn comes."""
        self.queued.setdefault(req.op, []).append(req)
        self._mark(req, "queued")
        self._start_next()

    # -- the run -------------------------------------------------------------------

    def _start_next(self) -> None:
        while self.running is None and self.queued:
            op = next(iter(self.queued))
            waiting = [r for r in self.queued.pop(op) if self._mark(r, "running")]
            if waiting:
                self._start(op, waiting)

    def _start(self, op: str, requests: list[ShareRequest]) -> None:
        env = {**os.environ, LOCAL_WRITES_ENV: "1"}
        argv = [*_python(), "-m", "ctindex", "-C", os.fspath(self.root), "--json", op]
        try:
            proc = subprocess.Popen(
                argv,
                # Never the project folder: every share client can write it, and
                # `-m` puts the working folder first on sys.path (an `argparse.py`
                # dropped there would run as the host's user).
                cwd="/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            self._answer(requests, {"ok": False, "error": f"cannot run {op}: {exc}"})
            return
        assert proc.stdout is not None
        self.running = Run(op, requests, proc, self.clock())
        self.sel.register(proc.stdout, selectors.EVENT_READ, RUN_KEY)

    def read(self) -> None:
        """The run's output is readable: keep it, or finish at its end."""
        run = self.running
        if run is None or run.proc.stdout is None:
            return
        try:
            chunk = os.read(run.proc.stdout.fileno(), 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk:
            if len(run.output) < OUTPUT_MAX:
                run.output += chunk[: OUTPUT_MAX - len(run.output)]
            return
        self._finish(run)

    def _finish(self, run: Run) -> None:
        assert run.proc.stdout is not None
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(run.proc.stdout)
        run.proc.stdout.close()
        try:
            code = run.proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            code = run.proc.wait()
        self.running = None
        self.runs += 1
        answer = self._outcome(run, code)
        ms = round((self.clock() - run.started) * 1000, 3)
        if self.log is not None:
            self.log(
                "share-run",
                op=run.op,
                requests=len(run.requests),
                exit=code,
                ms=ms,
                error=answer.get("error"),
            )
        self._answer(run.requests, {**answer, "run_ms": ms})
        self._start_next()

    def _outcome(self, run: Run, code: int) -> dict[str, object]:
        """The answer to a finished run: its report and what was published."""
        try:
            doc: object = json.loads(bytes(run.output))
        except (UnicodeDecodeError, ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            return {"ok": False, "error": f"{run.op} exited {code} without a report"}
        error = doc.get("error")
        if isinstance(error, dict):
            message = error.get("message")
            return {"ok": False, "error": f"{run.op}: {message or 'failed'}"}
        published = self.done()
        if "error" in published:
            return {"ok": False, **published}
        report = {k: v for k, v in doc.items() if k not in NOT_REPORTED}
        return {"ok": True, "op": run.op, "report": report, **published}

    def _answer(self, requests: list[ShareRequest], answer: dict[str, object]) -> None:
        for req in requests:
            req.respond(_fitting(answer, req.slot))

    # -- beats and stops -----------------------------------------------------------

    def beat(self) -> None:
        """Every heartbeat: progress records (a request whose file is gone
        leaves the queue), and the run's time limit."""
        self.beats += 1
        for op in list(self.queued):
            self.queued[op] = [r for r in self.queued[op] if self._mark(r, "queued")]
            if not self.queued[op]:
                del self.queued[op]
        run = self.running
        if run is None:
            return
        run.requests = [r for r in run.requests if self._mark(r, "running")]
        if self.clock() - run.started > self.limit_s:
            run.proc.kill()  # its output ends: read() answers with an error

    def _mark(self, req: ShareRequest, state: str) -> bool:
        record = {WORKING: state, "op": req.op, "beat": self.beats, "runs": self.runs}
        if self.host.mark(req, record):
            return True
        self.host.forget(req)  # its client gave up: nobody reads an answer
        return False

    def close(self, reason: str) -> None:
        """The daemon stops: interrupt the run (it publishes whole or not at
        all), and tell every waiting client."""
        run, self.running = self.running, None
        if run is not None:
            with contextlib.suppress(ProcessLookupError):
                run.proc.send_signal(signal.SIGINT)
            try:
                run.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                run.proc.kill()
                run.proc.wait()
            if run.proc.stdout is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self.sel.unregister(run.proc.stdout)
                run.proc.stdout.close()
            self._answer(run.requests, {"ok": False, "error": reason})
        queued, self.queued = self.queued, {}
        for requests in queued.values():
            self._answer(requests, {"ok": False, "error": reason})

    def status(self) -> dict[str, object]:
        run = self.running
        return {
            "running": run.op if run is not None else None,
            "queued": sum(len(r) for r in self.queued.values()),
            "runs": self.runs,
        }


def _python() -> list[str]:
    """The interpreter for a run, told not to put any folder first on sys.path
    (`-P`, Python 3.11+); before 3.11 the run's working folder is "/", which
    `-m` puts there instead, and no share client writes it.  Not `-I`: it
    would drop PYTHONPATH, which a development install may need."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P"]
    return [sys.executable]


def _fitting(answer: dict[str, object], size: int) -> dict[str, object]:
    """`answer` with its report's lists shortened until it fits `size` bytes
    with the fields ShareHost.respond adds (what was left out is counted in
    a note)."""
    report = answer.get("report")
    added = {"token": "t" * 64, "host": "h" * 128, "pid": 1 << 31, "heartbeat": 1e10}
    for keep in (None, 64, 16, 4, 0):
        fitted = answer
        if keep is not None and isinstance(report, dict):
            fitted = {**answer, "report": _trimmed(report, keep)}
        try:
            pad({**fitted, **added, "build": "b" * 64}, size)
        except ValueError:
            continue
        return fitted
    return {"ok": False, "error": "report too large for an answer"}


def _trimmed(report: dict[str, object], keep: int) -> dict[str, object]:
    out = dict(report)
    left_out: list[str] = []
    for key in TRIMMED:
        items = report.get(key)
        if isinstance(items, list) and len(items) > keep:
            out[key] = [str(i)[:200] for i in items[:keep]]
            left_out.append(f"{len(items) - keep} {key.replace('_', ' ')}")
    if left_out:
        notes = out.get("notes")
        kept = notes if isinstance(notes, list) else []
        out["notes"] = [*kept, f"left out of the answer: {', '.join(left_out)}"]
    return out
