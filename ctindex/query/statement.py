"""The freshness statement every indexed answer carries (the JSON
`freshness` object of docs/cli.md), and the proof a query's freshness step
hands its read: the types ctindex/query/freshness.py (which decides) and
ctindex/query/reconcile_here.py (which reconciles here) share.

Imported by every indexed query: standard library only at module level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:
    from ctindex.search.execute import Vouched
    from ctindex.store.snapshot import Snapshot

T = TypeVar("T")

# Modes of the statement (docs/cli.md, the `freshness` object).
WATCHER_CLEAN = "watcher-clean"  # a daemon's barrier over trusted events
RECONCILE_ON_QUERY = "reconcile-on-query"  # watching is off: reconciled here
FALLBACK = "fallback"  # the daemon could not vouch: reconciled here, `reason` says why
DIRECT = "direct"  # answered from the files, no index


class Freshness:
    """How an answer was made fresh. A plain class, not a dataclass: the
    fast path imports this module, and importing dataclasses cost every
    search ~8 ms (docs/decisions/perf.md §2). Mutable on purpose: a repair
    or the read itself completes it (`generation` is the one read)."""

    __slots__ = ("barrier_ms", "generation", "mode", "notes", "reason", "rebuilt", "reconcile_ms")

    def __init__(
        self,
        mode: str,
        reason: str | None,
        generation: int | None,
        barrier_ms: float | None = None,
        reconcile_ms: float | None = None,
        rebuilt: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.mode = mode  # WATCHER_CLEAN | FALLBACK | RECONCILE_ON_QUERY | DIRECT
        self.reason = reason
        self.generation = generation
        self.barrier_ms = barrier_ms
        self.reconcile_ms = reconcile_ms
        self.rebuilt = rebuilt  # why the index was rebuilt before answering
        self.notes = notes if notes is not None else []

    @classmethod
    def watcher_clean(cls, generation: int, barrier_ms: float) -> Freshness:
        """A plain barrier answer: nothing for the statement to explain."""
        return cls(WATCHER_CLEAN, None, generation, barrier_ms=barrier_ms)

    @property
    def plain_clean(self) -> bool:
        """Watcher-clean with nothing to report (no full pass the daemon
        reports once): the only statement the plan-less fast path gives."""
        return self.mode == WATCHER_CLEAN and self.reason is None

    def _fields(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Freshness) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"Freshness({self._fields()})"

    def to_json(self) -> dict[str, object]:
        return {**self._fields(), "notes": list(self.notes)}


# The JSON object's keys, in the order docs/cli.md shows them.
_FIELDS = ("mode", "reason", "generation", "barrier_ms", "reconcile_ms", "rebuilt", "notes")

DIRECT_REASON = "answered from the files, without the index"
NO_SCOPES_REASON = "no scopes: nothing to index"
READ_WHEN_ASKED = "read from the file when asked"


def read_when_asked(reconcile_ms: float) -> Freshness:
    """The statement of one concept read from its own file (`show`,
    ctindex/api.py Index.get): no index to prove, so never stale."""
    return Freshness(DIRECT, READ_WHEN_ASKED, None, reconcile_ms=reconcile_ms)


class Proof(NamedTuple):
    """How the index was made current (`prove`), and what the read must then
    find: the generation a daemon vouched for (`by_daemon`), or the one this
    process's own reconciliation published or found current; a generation
    published on top of it is fine (ctindex/search/execute.py Vouched)."""

    fresh: Freshness
    expect: Vouched | None
    by_daemon: bool = False
    # The network share's host that vouched: the index's one writer, so this
    # process never repairs nor rebuilds it (ShareHostWrites instead).
    share_host: str | None = None


Reader = Callable[["Snapshot"], T]  # what the caller does with a fresh generation
# How the caller opens the published generation (a new one per query, or
# the API's kept one while MANIFEST is unchanged): runs the reader on it.
Opener = Callable[[Callable[["Snapshot"], T]], T]
