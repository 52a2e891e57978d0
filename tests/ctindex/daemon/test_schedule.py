"""The heartbeat/audit schedule (ctindex/daemon/schedule.py) on fake clocks."""

from __future__ import annotations

from ctindex.daemon.schedule import (
    AUDIT_JITTER,
    GAP_LATE_S,
    GAP_SKEW_S,
    HEARTBEAT_S,
    Beat,
    Schedule,
)


class Clocks:
    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = 5000.0

    def step(self, mono: float, wall: float | None = None) -> None:
        self.mono += mono
        self.wall += mono if wall is None else wall


def schedule(clocks: Clocks) -> Schedule:
    return Schedule(lambda: clocks.mono, lambda: clocks.wall)


def test_a_regular_beat_finds_nothing() -> None:
    clocks = Clocks()
    s = schedule(clocks)
    assert not s.beat_due(clocks.mono)
    clocks.step(HEARTBEAT_S)
    assert s.beat_due(clocks.mono)
    assert s.beat() == Beat(gap=False, audit=False)
    assert s.next_beat() == clocks.mono + HEARTBEAT_S


def test_a_wall_clock_jump_is_a_gap_once() -> None:
    clocks = Clocks()
    s = schedule(clocks)
    clocks.step(HEARTBEAT_S, wall=HEARTBEAT_S + GAP_SKEW_S + 1)
    assert s.beat().gap
    clocks.step(HEARTBEAT_S)
    assert not s.beat().gap


def test_a_late_beat_is_a_gap() -> None:
    clocks = Clocks()
    s = schedule(clocks)
    clocks.step(GAP_LATE_S + 1)
    assert s.beat().gap


def test_audit_is_due_within_its_jitter_and_rescheduled() -> None:
    clocks = Clocks()
    s = schedule(clocks)
    s.audit_seconds = 100
    s.audit_after(clocks.mono)
    assert 100 * (1 - AUDIT_JITTER) <= s.next_audit - clocks.mono <= 100 * (1 + AUDIT_JITTER)
    clocks.step(100 * (1 - AUDIT_JITTER) - 1)
    assert not s.beat().audit
    clocks.step(100 * 2 * AUDIT_JITTER + 1)
    assert s.beat().audit
    assert s.next_audit > clocks.mono  # the next one is one interval away
