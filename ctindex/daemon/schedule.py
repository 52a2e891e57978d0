"""When the daemon looks again without being asked.

The heartbeat runs every HEARTBEAT_S; on each beat the loop re-checks the
mount table, the config's fingerprint and the folders root detection listed
(ctindex/daemon/lifecycle.py `_heartbeat`). This module owns the clock side:
when the next beat is due, whether the last one came so late, or across such
a wall-clock jump, that events may have been missed, and when the jittered
audit (a full pass every audit_seconds * U(0.75, 1.25)) is due.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

HEARTBEAT_S = 1.0
GAP_SKEW_S = 2.0  # wall clock moved this much more than the monotonic one: suspend/jump
GAP_LATE_S = 10.0  # a heartbeat this late: the process was stopped or starved
AUDIT_JITTER = 0.25
DEFAULT_AUDIT_S = 300  # before the plan is loaded


@dataclass(frozen=True)
class Beat:
    """What one heartbeat found, as the full-pass reasons it calls for."""

    gap: bool  # suspend/resume, a clock jump or a stopped process
    audit: bool


class Schedule:
    def __init__(self, clock: Callable[[], float], wall: Callable[[], float]) -> None:
        self.clock = clock
        self.wall = wall
        self.audit_seconds: float = DEFAULT_AUDIT_S
        self.next_audit = float("inf")
        self._last_mono = clock()
        self._last_wall = wall()

    def restart(self) -> None:
        """The loop starts serving now: the first beat is one interval away."""
        self._last_mono, self._last_wall = self.clock(), self.wall()

    def next_beat(self) -> float:
        return self._last_mono + HEARTBEAT_S  # read at each call: tests lengthen it

    def beat_due(self, now: float) -> bool:
        return now >= self.next_beat()

    def audit_after(self, now: float) -> None:
        """A full pass ended (or the audit ran) at `now`: the next one is due
        one jittered interval later."""
        jitter = random.uniform(1 - AUDIT_JITTER, 1 + AUDIT_JITTER)
        self.next_audit = now + self.audit_seconds * jitter

    def beat(self) -> Beat:
        mono, wall = self.clock(), self.wall()
        skew = abs((wall - self._last_wall) - (mono - self._last_mono))
        gap = skew > GAP_SKEW_S or mono - self._last_mono > GAP_LATE_S
        self._last_mono, self._last_wall = mono, wall
        audit = mono >= self.next_audit
        if audit:
            self.audit_after(mono)
        return Beat(gap, audit)
