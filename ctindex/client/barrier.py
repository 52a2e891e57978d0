"""One barrier, two ways to ask it.

A barrier asks whoever watches the project's files to prove that every
change made before the request is in the generation it names. `sync`
answers with `Synced` (the watcher's BarrierResult and the plan digest it
vouches under) or `Unsynced` (why not, and what that allows the caller).
Both implementations give the same two answers, so what an answer means is
decided in one table (ctindex/query/freshness.py `decide`), whoever was
asked:

* SocketBarrier: this machine's daemon, over the project's socket
  (ctindex/client/daemon_requests.py, docs/daemon.md);
* ShareBarrier: a network share's host, through files in the share
  (ctindex/client/share.py, docs/network-shares.md).

Neither raises for a failed exchange, and each is bounded by the budget it
is given. Standard library only at module level: the query path imports it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: the query path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ctindex.ipc.protocol import BarrierResult, Keeper
    from ctindex.ipc.runtime_dir import RuntimePaths


class Synced:
    """The barrier was answered: `result` is the watcher's, under `plan`."""

    __slots__ = ("clock", "host", "plan", "result")

    def __init__(
        self, result: BarrierResult, plan: str, host: str | None = None, clock: str | None = None
    ) -> None:
        self.result = result
        self.plan = plan  # the digest the answer vouches under
        self.host = host  # the share host that answered; None: this machine's daemon
        self.clock = clock  # how far this host's clock is off the share's, if it is

    def __repr__(self) -> str:
        return f"Synced(plan={self.plan!r}, host={self.host!r}, result={self.result!r})"


class Unsynced:
    """No answer to rely on, and why. The flags say what the caller may do."""

    __slots__ = ("other_build", "other_plan", "reason", "serving", "spawnable")

    def __init__(
        self,
        reason: str,
        *,
        spawnable: bool = False,
        other_build: bool = False,
        other_plan: bool = False,
        serving: str | None = None,
    ) -> None:
        self.reason = reason  # shown in the statement's reason and `watch status`
        self.spawnable = spawnable  # nothing listens: a daemon may be started
        self.other_build = other_build  # a daemon of another build, leaving: start its successor
        self.other_plan = other_plan  # the watcher runs another plan: ask again under ours
        # The share host whose heartbeat is fresh: it serves the share and is
        # the index's one writer, so the caller must not write the index.
        self.serving = serving

    def __repr__(self) -> str:
        return f"Unsynced({self.reason!r}, serving={self.serving!r})"


class SocketBarrier:
    """This machine's daemon, asked over the project's socket. `meanwhile`
    runs between sending the request and reading the answer (not at all
    when it cannot be sent): a read that overlaps the daemon's work."""

    def __init__(
        self,
        paths: RuntimePaths,
        digest: str,
        *,
        config: list[int] | str | None = None,
        keeper: Keeper | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> None:
        self.paths, self.digest, self.config = paths, digest, config
        self.keeper, self.meanwhile = keeper, meanwhile

    def sync(self, timeout_ms: int) -> Synced | Unsynced:
        from ctindex.client.daemon_requests import PLAN_MISMATCH, BarrierFailed, send_barrier

        try:
            sent = send_barrier(
                self.paths, self.digest, timeout_ms, config=self.config, keeper=self.keeper
            )
            if self.meanwhile is not None:
                try:
                    self.meanwhile()
                except BaseException:  # an interrupt: the answer is not read
                    sent.close()
                    raise
            return Synced(sent.result(), self.digest)
        except BarrierFailed as failed:
            return Unsynced(
                failed.reason,
                spawnable=failed.spawnable,
                other_build=failed.other_build,
                other_plan=failed.reason == PLAN_MISMATCH,
            )


class ShareBarrier:
    """A network share's host, asked through the share. `digest` None: the
    host answers under whatever plan it runs, and only a host of this build
    is taken at its word (another build computes digests with other code)."""

    def __init__(self, index_dir: Path | str, digest: str | None) -> None:
        self.index_dir, self.digest = index_dir, digest

    def sync(self, timeout_ms: int | None) -> Synced | Unsynced:
        """`timeout_ms` None: the share_barrier_ms the host's heartbeat names."""
        from ctindex.client import share

        outcome = share.ask(self.index_dir, self.digest, timeout_ms)
        if isinstance(outcome, share.NotAnswered):
            return Unsynced(outcome.reason, serving=outcome.serving, other_plan=outcome.other_plan)
        if self.digest is None:
            from ctindex.ipc.build_id import build_id

            if outcome.build != build_id():
                why = f"share host {outcome.host} runs another build"
                return Unsynced(why, other_plan=True, serving=outcome.host)
        return Synced(outcome.result, outcome.plan, outcome.host, outcome.clock)
