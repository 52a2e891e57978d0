"""The daemon's dirty set: debounce, coalescing, caps, hand-over."""

from __future__ import annotations

from ctindex.daemon.dirtyset import MAX_DELAY_FACTOR, DirtySet


def test_debounce_waits_for_quiet_then_hands_over_once() -> None:
    d = DirtySet(0.1)
    d.add(["docs/a.md"], now=10.0)
    d.add(["docs/a.md", "docs/b.md"], now=10.05)
    assert not d.ready(10.1)  # window restarted by the second event
    assert d.ready(10.15)
    taken = d.take()
    assert taken.paths == ["docs/a.md", "docs/b.md"]
    assert taken.first_event == 10.0 and not taken.rescan
    assert len(d) == 0 and d.deadline() is None


def test_constant_churn_is_not_starved() -> None:
    d = DirtySet(0.1)
    t = 0.0
    while not d.ready(t):
        d.add([f"docs/f{t}.md"], now=t)
        t += 0.05
    assert t <= 0.1 * MAX_DELAY_FACTOR + 0.05


def test_keys_under_a_queued_folder_are_covered() -> None:
    d = DirtySet(0.1)
    d.add(["docs/new"], now=0)
    d.add(["docs/new/x.md", "docs/new/deep/y.md"], now=0)
    assert d.paths() == ["docs/new"]


def test_many_paths_in_one_folder_collapse_to_the_folder() -> None:
    d = DirtySet(0.1, folder_cap=4)
    d.add([f"docs/sub/f{i}.md" for i in range(5)] + ["docs/other.md"], now=0)
    assert d.paths() == ["docs/other.md", "docs/sub"]
    d.add(["docs/sub/f9.md"], now=0)  # already covered by the folder
    assert d.paths() == ["docs/other.md", "docs/sub"]


def test_too_many_paths_overall_become_a_rescan() -> None:
    d = DirtySet(0.1, folder_cap=1000, total_cap=10)
    d.add([f"d{i}/f.md" for i in range(11)], now=0)
    assert d.rescan_reason == "too-many-paths" and len(d) == 0
    d.add(["d1/g.md"], now=1)  # ignored: the full pass covers everything
    taken = d.take()
    assert taken.rescan and taken.paths == [] and taken.reason == "too-many-paths"


def test_rescan_request_keeps_first_reason_and_restore_puts_work_back() -> None:
    d = DirtySet(0.1)
    d.request_rescan("overflow", now=1.0)
    d.request_rescan("audit", now=2.0)
    taken = d.take()
    assert taken.reason == "overflow"
    d.add(["docs/a.md"], now=3.0)
    batch = d.take()
    d.add(["docs/b.md"], now=4.0)
    d.restore(batch, now=5.0)
    assert d.paths() == ["docs/a.md", "docs/b.md"]
    assert d.first_event() == 3.0  # latency still counts from the oldest event
