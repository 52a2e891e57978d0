"""The query path's client: `ctindex search` answered by the daemon.

The console entry (`ctindex`, `python -m ctindex`) imports this module first
and nothing else of ctindex. For a `search` it sends the words of the
command line, the working folder and its build id to the project's daemon
(the `search` op, docs/daemon.md "Query path") and prints the stdout and
stderr text and the exit code the daemon computed with the in-process code
(ctindex/daemon/query.py runs `ctindex.cli.main` itself, so the bytes are
the same by construction). Whatever goes wrong here (no socket, another
build, a declined or slow query, a daemon dying mid-answer, a reply that
does not parse) returns None and the caller runs the in-process path, with
its own barrier and its own freshness rules (ctindex/query/freshness.py): this path can make a
search faster, never different.

Standard library only, and only what a search costs anyway: no argparse,
no plan, no index code before the request (`python -X importtime`,
docs/decisions/perf.md §"Query path").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path  # already imported by ctindex.ipc.runtime_dir

from ctindex.backends.remote import network_fstype
from ctindex.base import streams
from ctindex.client import envelope
from ctindex.ipc import protocol
from ctindex.ipc.build_id import build_id
from ctindex.ipc.peer import owned_by_me
from ctindex.ipc.records import read_record
from ctindex.ipc.runtime_dir import RuntimePaths, store_link
from ctindex.policy.root import find_root

TYPE_CHECKING = False  # not `typing`'s: a search does not import typing
if TYPE_CHECKING:
    from ctindex.ipc.protocol import SearchAnswer

OP = "search"
# What this module can send: a `search` with none of these (help and version
# text depend on the terminal, --direct needs no daemon, a fault hook must
# fire in this process).
_NOT_HERE = ("-h", "--help", "--version", "--direct")
_WITH_VALUE = ("-C", "--project")
FAULT_ENV = "CTINDEX_FAULT"  # ctindex/base/durable.py: the crash-test hook
DEFAULT_BARRIER_MS = 500  # ctindex/policy/config.py's default, when no query-plan record says
# Beyond the daemon's own bounds (barrier budget + QUERY_BUDGET_S of
# ctindex/daemon/query.py): only a stopped or wedged daemon gets here.
SLACK_S = 0.5
QUERY_BUDGET_S = 2.0  # mirrors ctindex/daemon/query.py (a test checks they agree)
MAX_REPLY = 64 << 20  # the daemon declines larger answers (MAX_OUTPUT in query.py)
INTERRUPTED = 130  # SIGINT's exit code (128 + 2), as shells report it (docs/cli.md)


def console() -> None:
    """Entry point of every `ctindex` process: the daemon's answer when it
    has one, else the full CLI (ctindex.cli.console)."""
    import gc

    gc.disable()  # as ctindex.cli.console: a short-lived process, collected at exit
    refused = streams.prepare()  # before anything writes: a closed stdout or stderr, a dead pipe
    if refused is not None:
        os._exit(refused)
    try:
        code = answer(sys.argv[1:])
        if code is None:
            from ctindex.cli import console as full

            full()  # exits itself
            return
    except KeyboardInterrupt:  # Ctrl-C anywhere, even while printing: no traceback
        code = INTERRUPTED
    os._exit(code)


def _search_words(argv: list[str]) -> str | None:
    """The -C value ('' for none) when `argv` is a search this path may
    send, else None. A misreading here can only cost a fallback: the daemon
    parses `argv` with the CLI's own parser and declines a project or a
    command that is not its own."""
    project = ""
    command = None
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            break
        if token in _NOT_HERE or token.startswith(("--project=", "--direct")):
            return None
        if command is None and token in _WITH_VALUE:
            if i + 1 >= len(argv):
                return None
            project = argv[i + 1]
            i += 2
            continue
        if command is None and not token.startswith("-"):
            command = token
        i += 1
    return project if command == OP else None


def _budget_s(runtime: str) -> float:
    """How long to wait for the daemon: the barrier budget the last plan
    recorded (ctindex/policy/plan_record.py's record; a hint, never trusted for more
    than a wait), plus the daemon's query budget."""
    record = read_record(Path(runtime, "query-plan.json"), 4096)
    budget = record.get("barrier_timeout_ms") if record else None
    if not isinstance(budget, int) or isinstance(budget, bool) or not 10 <= budget <= 10_000:
        budget = DEFAULT_BARRIER_MS
    return budget / 1000 + QUERY_BUDGET_S + SLACK_S


def answer(argv: list[str]) -> int | None:
    """Print the daemon's answer to `argv` and return its exit code; None
    when this path cannot answer (nothing has been written then)."""
    if os.environ.get(FAULT_ENV) or not hasattr(sys.stdout, "reconfigure") or sys.stderr is None:
        return None  # a closed or replaced stream: the full CLI words that
    project = _search_words(argv)
    if project is None:
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    root = find_root(os.path.abspath(os.path.join(cwd, project)))
    if root is None:
        return None
    try:
        st = os.stat(root)
    except OSError:
        return None
    if not owned_by_me(st) or network_fstype(st.st_dev) is not None or store_link(root):
        # A project folder of another user, a linked store folder: the full
        # CLI refuses them (ctindex/policy/store_path.py). A network
        # filesystem: no daemon of this host serves it (ctindex/policy/netfs.py),
        # so its socket would only cost round trips to refuse; the share's
        # host answers the in-process path.
        return None
    paths = RuntimePaths(Path(root), Path(root, ".ct", "okf", "runtime"))
    from ctindex.base.tty import decided  # the daemon's stdout is no terminal: decide colour here

    request: protocol.Message = {"op": OP, "argv": decided(argv, sys.stdout), "cwd": cwd}
    answered = _ask(paths, request, _budget_s(os.fspath(paths.dir)))
    if answered is None:
        return None
    return _print(answered)


def _ask(paths: RuntimePaths, request: protocol.Message, timeout: float) -> SearchAnswer | None:
    """The client envelope every daemon request goes through
    (ctindex/client/envelope.py: the peer check, a strike skipped
    or recorded, the build id, the bound), with any failure just "not
    answered"."""
    try:
        reply = envelope.request(paths, request, timeout, ack=True, max_reply=MAX_REPLY)
    except envelope.BarrierFailed:
        return None
    return protocol.search_answer(reply, build_id())  # declined or another build: None


def _error_document(out: str) -> bool:
    """Whether `out` is a `--json` error document (ctindex/schemas/error.json),
    which the CLI writes after the error's line on stderr (only read when
    stdout could not be written, so the import costs nothing otherwise)."""
    import json

    try:
        document = json.loads(out)
    except ValueError:
        return False
    return isinstance(document, dict) and set(document) == {"error"}


def _print(answer: SearchAnswer) -> int:
    """Write the answer as ctindex.cli.console would: stdout with
    surrogateescape (undecodable names print their bytes), 74 when stdout
    cannot be written (a broken pipe included: ctindex/base/streams.py)."""
    out, err, code = answer["stdout"], answer["stderr"], answer["code"]
    stdout = sys.stdout
    try:
        if out:  # even an empty write fails on a full device: a text error writes none
            stdout.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]
            stdout.write(out)
            stdout.flush()
    except OSError as exc:
        _silence_stdout()  # nothing flushes into the failed stream again
        if not _error_document(out):  # as in process: an error's own line is already in err
            err += streams.line_for(exc) + "\n"
        code = streams.EX_IOERR
    try:
        sys.stderr.write(err)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code


def _silence_stdout() -> None:
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass
