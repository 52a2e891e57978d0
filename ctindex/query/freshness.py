"""Query freshness: the one place that decides how an answer is proven
current before it is read (docs/architecture.md "Query freshness").

`fresh_answer` is the entry point of every indexed read: `ctindex search`
(ctindex/commands/search.py), the Python API (ctindex/api.py, and through it
`show` and the MCP server). It returns the answer with its `Freshness`
statement, the JSON `freshness` object of docs/cli.md:

1. `--direct` (`Options.direct`): the files are read, no index, no daemon;
   so is a plan without scopes (nothing to index), once it is loaded.
2. A process without a plan (`Options.plan_hint`) first asks the daemon
   with the plan digest recorded by ctindex/policy/plan_record.py; a plain
   watcher-clean barrier answers from the generation it vouched for, without
   compiling the plan.
3. Otherwise the plan is loaded and proven: watching off ->
   reconcile-on-query; else one barrier (ctindex/client/barrier.py: this
   machine's daemon, or a network share's host through the share), whose
   answer one table decides (`decide`): `judge` (the trust test, written
   only here) for an answer; for none, the share host's ShareHostWrites,
   at most one guarded spawn (never in CI: ctindex/query/cimode.py), a
   successor for a daemon of another build, and reconciliation here.
4. The published generation is read; a damaged one is repaired and read
   again; an index that cannot be brought up to date (busy writer, read-only)
   is answered from the files as a fallback.

Step 3's reconciliation here and step 4 live in ctindex/query/reconcile_here.py.
ctindex/client/ only carries the messages (barrier, spawn); the indexer
does the reconciling (`rebuild_reason`, `update`, `repair`; the file table's
`load_file_table` and `newly_trusted` are ctindex/store/filetable.py's).
Imports are lazy: the fast path of step 2 must not pay for the plan, the
indexer or the store writer (docs/decisions/perf.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from ctindex.client.barrier import Synced, Unsynced
    from ctindex.ipc.protocol import BarrierResult, Keeper
    from ctindex.policy.netfs import Share
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project
    from ctindex.search.execute import Vouched
    from ctindex.store.snapshot import Snapshot

from ctindex.query.statement import (
    DIRECT,
    DIRECT_REASON,
    FALLBACK,
    NO_SCOPES_REASON,
    RECONCILE_ON_QUERY,
    WATCHER_CLEAN,
    Freshness,
    Opener,
    Proof,
    Reader,
)

T = TypeVar("T")


class Options(NamedTuple):
    """What the caller asks of the freshness step."""

    direct: bool = False  # --direct: answer from the files, no index, no daemon
    # A short-lived process without a plan (the CLI): try the plan recorded
    # by ctindex/policy/plan_record.py first, and record the plan it has to load. A
    # long-lived one (ctindex/api.py) keeps its plan and records it itself.
    plan_hint: bool = False
    spawn: bool = True  # may start a daemon (CI mode still forbids it: ctindex/query/cimode.py)
    # A long-lived reader holding its generation open (ctindex/api.py): read
    # it while the daemon answers the barrier, and keep that answer when the
    # barrier vouches for the very generation read (`_EarlyRead`).
    overlap: bool = False
    # Its connection to the daemon, kept between barriers (ctindex/ipc/protocol.py).
    keeper: Keeper | None = None


DEFAULT_OPTIONS = Options()


class Verdict(NamedTuple):
    """What a barrier's answer proves (`judge`)."""

    proven: Freshness | None  # the daemon's answer is the whole proof
    reconcile_reason: str | None  # else why this query reconciles itself


class Prior(NamedTuple):
    """A barrier the fast path already asked (under `digest`; None: under
    whatever plan the share host runs), reused by the slow path where it
    holds for the plan computed there: nothing is asked twice."""

    digest: str | None
    outcome: Synced | Unsynced
    through_share: bool

    def holds_for(self, digest: str, through_share: bool) -> bool:
        from ctindex.client.barrier import Synced

        if through_share != self.through_share:
            return False
        if isinstance(self.outcome, Synced):
            return self.outcome.plan == digest
        # Asking again would wait again; a daemon of another build leaves
        # whatever plan was asked.
        return self.outcome.other_build or self.digest in (None, digest)


class Answered(Generic[T]):
    """An answer and how it was made fresh."""

    __slots__ = ("freshness", "value")

    def __init__(self, freshness: Freshness, value: T) -> None:
        self.freshness = freshness
        self.value = value


def judge(result: BarrierResult) -> Verdict:
    """The trust test: when a daemon's barrier may be labelled watcher-clean.

    Only events from a native watcher that is not degraded keep an index
    fresh by themselves. A barrier the poll lane or a degraded watcher
    answered with a full pass is still a proof, worded as a fallback
    ("unreliable filesystem"); without that pass it proves nothing and the
    query reconciles itself. A full pass the daemon reports (overflow,
    audit) is watcher-clean with its reason. A store the daemon found
    changed outside ctindex, and rebuilt from the files, is a fallback that
    says so (ctindex/daemon/storeguard.py). The trust rule itself is the
    protocol's (ctindex/ipc/protocol.py `events_trusted`), shared with the
    daemon."""
    from ctindex.ipc.protocol import events_trusted

    if result.outside is not None and result.reconciled:
        from ctindex.store.generation import OUTSIDE

        return Verdict(
            Freshness(
                FALLBACK,
                f"{OUTSIDE}: {result.outside}; rebuilt by the daemon",
                result.generation,
                barrier_ms=result.barrier_ms,
                reconcile_ms=result.reconcile_ms,
            ),
            None,
        )
    if not events_trusted(result.backend, result.degraded):
        why = result.degraded or result.backend_reason or f"{result.backend} lane"
        reason = f"unreliable filesystem: {why}"
        if not result.reconciled:
            return Verdict(None, reason)
        return Verdict(
            Freshness(
                FALLBACK,
                reason,
                result.generation,
                barrier_ms=result.barrier_ms,
                reconcile_ms=result.reconcile_ms,
            ),
            None,
        )
    if result.reconciled:
        return Verdict(
            Freshness(
                WATCHER_CLEAN,
                f"reconciled by the daemon: {result.reconcile_reason}",
                result.generation,
                barrier_ms=result.barrier_ms,
                reconcile_ms=result.reconcile_ms,
            ),
            None,
        )
    return Verdict(Freshness.watcher_clean(result.generation, result.barrier_ms), None)


def fresh_answer(
    project: Project,
    load_plan: Callable[[], Plan],
    read: Reader[T],
    *,
    from_files: Callable[[Plan], T] | None = None,
    open_generation: Opener[T] | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> Answered[T]:
    """The one entry point: prove the index current (or say why not), then
    `read` the published generation (see the module docstring).

    `load_plan` is called at most once, and not at all when the fast path
    answers. `from_files` answers from the files when the index cannot be
    read fresh (--direct, a busy or read-only index); without it those
    errors (IndexBusy, IndexReadOnly) reach the caller. `open_generation`
    defaults to opening the published generation for this read only."""
    opener: Opener[T] = open_generation or _opener(project)
    prior: Prior | None = None
    if options.plan_hint and not options.direct:
        answered, prior = _hinted(project, read, opener)
        if answered is not None:
            return answered
    plan = load_plan()
    if options.direct:
        if from_files is None:
            raise ValueError("a direct answer needs from_files")
        return Answered(Freshness(DIRECT, DIRECT_REASON, None), from_files(plan))
    # What follows may write the index or start a daemon: never in a project
    # folder of another user (UnsafeStorePath; the CLI refused before, this
    # is ctindex.Index's and the MCP server's refusal).
    from ctindex.policy.store_path import check_store

    check_store(project.root, lambda: plan.settings.share_index_with_group, write=True)
    if not plan.scopes and from_files is not None:
        # Nothing can be indexed (docs/cli.md, "No scopes"): the empty plan's
        # answer, with no `.ct/okf/` written and no daemon started that
        # would watch nothing for `idle_seconds`.
        return Answered(Freshness(DIRECT, NO_SCOPES_REASON, None), from_files(plan))
    from ctindex.errors import ShareHostWrites
    from ctindex.query import reconcile_here as here
    from ctindex.store.generation import TornManifest
    from ctindex.store.lock import IndexBusy, IndexReadOnly

    early = _EarlyRead(read, opener) if options.overlap else None
    try:
        proof = prove(
            project,
            plan,
            prior,
            spawn=options.spawn,
            meanwhile=early,
            keeper=options.keeper,
        )
        fresh = proof.fresh
        kept = early.accepted(proof) if early is not None else None
        value = (
            kept[0] if kept is not None else here.read_repairing(project, plan, read, opener, proof)
        )
    except TornManifest as torn:  # maybe only a mount's cache: not repaired from here
        if from_files is None:
            raise
        fresh, value = here.from_files(
            from_files, plan, torn, "MANIFEST reads torn through this mount"
        )
    except ShareHostWrites as hosted:  # the share's host writes the index, not us
        if from_files is None:
            raise
        fresh, value = here.from_files(from_files, plan, hosted, hosted.why)
    except IndexBusy as busy:  # a stopped or slow writer holds the update lock
        if from_files is None:
            raise
        fresh, value = here.from_files(from_files, plan, busy, "index busy")
    except IndexReadOnly as denied:  # behind the files and cannot be written
        if from_files is None:
            raise
        fresh, value = here.from_files(from_files, plan, denied, "read-only index")
    if options.plan_hint:
        from ctindex.policy import plan_record

        plan_record.remember(project, plan)
    return Answered(fresh, value)


class _EarlyRead(Generic[T]):
    """The read of the generation a long-lived reader holds, run while the
    daemon answers the barrier (`prove`'s `meanwhile`) instead of after it.

    A generation's files never change once published, so an answer read
    from it is the same whenever it is read; what the barrier adds is which
    generation may answer. The early answer is kept only when the barrier's
    proof is the daemon's and vouches for the very generation read, by the
    same check a read after it makes (ctindex/search/execute.py Vouched: its
    plan, and its identity or one it descends from); any other proof, or a
    generation the barrier's answer does not vouch for (the daemon applied
    a change meanwhile), drops it and the read runs after the proof as
    always. So does any error of the early read: the read after the proof
    meets it again and handles it (a damaged file repaired, a busy index)."""

    def __init__(self, read: Reader[T], opener: Opener[T]) -> None:
        self._read, self._opener = read, opener
        self._got: tuple[Snapshot, T] | None = None

    def __call__(self) -> None:
        def keep(snap: Snapshot) -> T:
            value = self._read(snap)
            self._got = (snap, value)
            return value

        try:
            self._opener(keep)
        except Exception:  # met again, and handled, by the read after the proof
            self._got = None

    def accepted(self, proof: Proof) -> tuple[T] | None:
        """(the early answer,) when `proof` vouches for its generation."""
        if self._got is None or not proof.by_daemon or proof.expect is None:
            return None
        snap, value = self._got
        if not proof.expect.matches(snap):
            return None
        proof.fresh.generation = snap.generation  # the statement names the generation read
        return (value,)


def _opener(project: Project) -> Opener[T]:
    def open_published(work: Callable[[Snapshot], T]) -> T:
        from ctindex.store.snapshot import with_snapshot

        return with_snapshot(project.index_dir, work)

    return open_published


def _hinted(
    project: Project, read: Reader[T], opener: Opener[T]
) -> tuple[Answered[T] | None, Prior | None]:
    """Step 2: a healthy watcher's answer without loading the plan: this
    machine's daemon, asked under the plan digest recorded last time, or,
    without a record, a network share's host, under whatever plan it runs
    (the host checks its plan's stamps before every such answer,
    ctindex/daemon/lifecycle.py, so the digest it names is the plan of the
    files as the request found them). Returns the answer, or the barrier
    the slow path may reuse (None: ask again there)."""
    from ctindex.client.barrier import ShareBarrier, SocketBarrier
    from ctindex.policy import plan_record

    answered: Answered[T] | None = None
    prior: Prior | None = None
    on_share = _root_on_a_share(project)
    # A share client never has a record of its own (plan_record.remember
    # writes none there): reading the host's through the mount costs round
    # trips and cannot match this mount's stats.
    hint = None if on_share else plan_record.recall(project)
    if hint is not None:
        from ctindex.ipc.runtime_dir import RuntimePaths

        paths = RuntimePaths.for_project(project)
        barrier = SocketBarrier(paths, hint.digest, config=hint.config)
        prior = Prior(hint.digest, barrier.sync(hint.barrier_timeout_ms), through_share=False)
        answered, prior = _take(project, prior, read, opener)
    if answered is None and prior is None and (on_share or _on_a_share(project)):
        outcome = ShareBarrier(project.index_dir, None).sync(None)
        answered, prior = _take(project, Prior(None, outcome, through_share=True), read, opener)
    return answered, prior


def _take(
    project: Project, prior: Prior, read: Reader[T], opener: Opener[T]
) -> tuple[Answered[T] | None, Prior | None]:
    """The fast path's answer from a plain watcher-clean barrier; anything
    else is the slow path's to word (once: a daemon reports a full pass to
    one barrier only, so it must not be lost to asking again)."""
    from ctindex.client.barrier import Synced

    outcome = prior.outcome
    if not isinstance(outcome, Synced):
        return None, None if outcome.other_plan else prior
    fresh = judge(outcome.result).proven
    if fresh is None or not fresh.plain_clean:
        return None, prior
    if outcome.host is not None:
        from ctindex.policy.netfs import project_share

        _label(fresh, outcome, project_share(project))
    from ctindex.search.execute import PlanMismatch
    from ctindex.store.durable import IndexCorrupt
    from ctindex.store.generation import TornManifest

    try:
        value = opener(_vouched(read, fresh, _expect(outcome)))
    except PlanMismatch:
        return None, None  # not the index the watcher vouched for: start over
    except (IndexCorrupt, TornManifest, OSError):
        # The slow path repairs the index; on a share it reads again through
        # the mount, and answers from the files if it must (the host, not
        # this client, repairs the index there).
        return None, prior
    return Answered(fresh, value), None


def _root_on_a_share(project: Project) -> bool:
    """The project folder lies on a network filesystem, told from its stat
    (one round trip there; nothing more read on a local disk)."""
    import os

    from ctindex.backends.remote import network_fstype

    try:
        return network_fstype(os.stat(project.root).st_dev) is not None
    except OSError:
        return False


def _on_a_share(project: Project) -> bool:
    """The index folder or the root lies on a network filesystem, as the
    paths are spelt (the mount table only: nothing is asked of the share;
    a symlink out of a share is found by the slow path's full check)."""
    import os

    from ctindex.policy.netfs import share_of

    paths = [os.fspath(project.index_dir), os.fspath(project.root)]
    return share_of(paths, below=False, resolve=False) is not None


def _label(fresh: Freshness, outcome: Synced, share: Share | None) -> None:
    """Name the share host that vouched, and what the mount's caches may hide."""
    label = f"share host {outcome.host}, barrier {outcome.result.barrier_ms:.0f} ms"
    label = f"{label}; {outcome.clock}" if outcome.clock else label
    if fresh.mode == WATCHER_CLEAN:
        fresh.reason = f"{label}; {fresh.reason}" if fresh.reason else label
    else:  # the host vouched after a full pass of its own (poll lane, ...)
        fresh.reason = f"share host {outcome.host}: {fresh.reason}"
    if share is not None:
        from ctindex.policy.netfs import cache_note

        note = cache_note(share)
        fresh.notes.extend([note] if note else [])


def _expect(outcome: Synced) -> Vouched:
    """What a barrier's answer vouched for (ctindex/search/execute.py)."""
    from ctindex.search.execute import Vouched

    return Vouched(outcome.plan, outcome.result.generation, outcome.result.identity)


def _vouched(read: Reader[T], fresh: Freshness, vouched: Vouched) -> Reader[T]:
    """`read`, only on a generation the watcher vouched for (Vouched.check)."""

    def checked(snap: Snapshot) -> T:
        vouched.check(snap)
        fresh.generation = snap.generation
        return read(snap)

    return checked


def prove(
    project: Project,
    plan: Plan,
    prior: Prior | None = None,
    *,
    spawn: bool = True,
    meanwhile: Callable[[], None] | None = None,
    keeper: Keeper | None = None,
) -> Proof:
    """Step 3: make the index reflect the files before a read; say how, and
    what the read must find (`Proof`). The barrier asked is the share host's
    on a network share (no daemon here can see the server's changes,
    ctindex/policy/netfs.py), else this machine's daemon; `meanwhile` runs
    while the daemon answers (fresh_answer's early read). Raises IndexBusy /
    IndexReadOnly (from the indexer) when it cannot, ShareHostWrites when
    the share's host writes the index and gave no answer this query can
    take (the caller answers from the files)."""
    from ctindex.client.barrier import ShareBarrier, SocketBarrier
    from ctindex.policy.netfs import ctime_kept_on, freshness_reason, project_share
    from ctindex.query import reconcile_here as here

    share = project_share(project, plan)
    if not plan.settings.watch:
        proof = here.reconcile(project, plan, RECONCILE_ON_QUERY, "watch disabled")
        if share is not None:  # the walk's blind spot on this share, if any
            kept = ctime_kept_on(project, share)
            caveat = freshness_reason(share, proof.fresh.reconcile_ms, kept)
            proof.fresh.reason = f"watch disabled; {caveat}"
        return proof
    digest = plan.digest()
    through_share = share is not None
    if prior is not None and prior.holds_for(digest, through_share):
        outcome = prior.outcome
    elif share is not None:
        outcome = ShareBarrier(project.index_dir, digest).sync(plan.settings.share_barrier_ms)
    else:
        from ctindex.ipc.runtime_dir import RuntimePaths

        paths = RuntimePaths.for_project(project)
        barrier = SocketBarrier(paths, digest, meanwhile=meanwhile, keeper=keeper)
        outcome = barrier.sync(plan.settings.barrier_timeout_ms)
    return decide(project, plan, share, outcome, spawn)


def decide(
    project: Project, plan: Plan, share: Share | None, outcome: Synced | Unsynced, spawn: bool
) -> Proof:
    """What a barrier's answer means, whoever was asked (ctindex/client/barrier.py).
    The first row that fits decides:

    | the barrier                 | through a share            | on this machine            |
    |-----------------------------|----------------------------|----------------------------|
    | answered, proven (`judge`)  | the answer, host named     | the answer                 |
    | answered, not proven        | ShareHostWrites            | reconcile here: fallback   |
    | unanswered, a host serves   | ShareHostWrites            | (no host on this machine)  |
    | unanswered, another build   | reconcile here             | reconcile, then successor  |
    | unanswered, nothing listens | reconcile here             | spawn (never in CI), then  |
    |                             |                            | reconcile here             |
    | unanswered                  | reconcile here             | reconcile here             |

    Through a share, "reconcile here" names what the walk cannot see there
    and what the mount's caches may hide; the host that serves is the
    index's one writer, so where it serves this process never writes."""
    from ctindex.client.barrier import Synced
    from ctindex.errors import ShareHostWrites
    from ctindex.query import reconcile_here as here

    if isinstance(outcome, Synced):
        verdict = judge(outcome.result)
        fresh = verdict.proven
        if fresh is not None:
            if outcome.host is not None:
                _label(fresh, outcome, share)
            return Proof(fresh, _expect(outcome), by_daemon=True, share_host=outcome.host)
        if outcome.host is not None:
            why = f"share host {outcome.host}: {verdict.reconcile_reason}"
            raise ShareHostWrites(outcome.host, why)
        return here.reconcile(project, plan, FALLBACK, verdict.reconcile_reason)
    if outcome.serving is not None:
        raise ShareHostWrites(outcome.serving, outcome.reason)
    if share is not None:
        from ctindex.policy.netfs import cache_note, ctime_kept_on, freshness_reason

        proof = here.reconcile(project, plan, FALLBACK, outcome.reason)
        kept = ctime_kept_on(project, share)
        caveat = freshness_reason(share, proof.fresh.reconcile_ms, kept)
        proof.fresh.reason = f"{outcome.reason}; {caveat}"
        note = cache_note(share)
        proof.fresh.notes.extend([note] if note else [])
        return proof
    return _without_daemon(project, plan, outcome, spawn)


def _without_daemon(project: Project, plan: Plan, failed: Unsynced, spawn: bool) -> Proof:
    """No trustworthy barrier from this machine's daemon: reconcile here, and
    start a daemon for the next query when nothing is listening (never
    waited for)."""
    from ctindex.client.daemon_requests import BUILD_MISMATCH
    from ctindex.client.spawn import STARTING
    from ctindex.client.spawn import spawn as start_daemon
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.query import reconcile_here as here

    paths = RuntimePaths.for_project(project)
    if failed.other_build:
        # Reconcile first (the one rebuild a new provider needs happens
        # here, not raced by the successor's startup pass), then start the
        # successor: it finds the index current.
        proof = here.reconcile(project, plan, FALLBACK, failed.reason)
        why_not = start_daemon(project.root, paths, successor=True)
        started = why_not in (None, STARTING)
        proof.fresh.reason = f"{BUILD_MISMATCH}; {'restarted' if started else why_not}"
        return proof
    reason = failed.reason
    if failed.spawnable:
        from ctindex.query.cimode import spawn_blocked

        why_not = spawn_blocked() if spawn else NO_SPAWN_REASON  # CI: no daemon outliving the job
        if why_not is None:
            why_not = start_daemon(project.root, paths)  # the next query uses it
        if why_not is not None and why_not != STARTING:
            reason = why_not
    return here.reconcile(project, plan, FALLBACK, reason)


NO_SPAWN_REASON = "no daemon started (asked not to)"
