"""The freshness statement (ctindex/query/statement.py): its JSON keys and
their order (docs/cli.md, the `freshness` object), and the statements made
without a barrier."""

from __future__ import annotations

from ctindex.query import statement


def test_the_json_statement_keeps_its_keys_and_order() -> None:
    fresh = statement.Freshness("fallback", "no daemon", 3, reconcile_ms=1.0, notes=["n"])
    assert list(fresh.to_json()) == [
        "mode",
        "reason",
        "generation",
        "barrier_ms",
        "reconcile_ms",
        "rebuilt",
        "notes",
    ]
    assert fresh.to_json()["notes"] == ["n"] and fresh.to_json()["notes"] is not fresh.notes


def test_only_a_plain_barrier_answer_is_plain_clean() -> None:
    plain = statement.Freshness.watcher_clean(4, 1.25)
    assert plain.plain_clean and (plain.mode, plain.generation, plain.barrier_ms) == (
        statement.WATCHER_CLEAN,
        4,
        1.25,
    )
    worded = statement.Freshness(statement.WATCHER_CLEAN, "reconciled by the daemon: audit", 4)
    assert not worded.plain_clean
    assert not statement.Freshness(statement.FALLBACK, None, 4).plain_clean


def test_a_concept_read_from_its_file_says_so() -> None:
    fresh = statement.read_when_asked(0.5)
    assert (fresh.mode, fresh.reason, fresh.generation) == (
        statement.DIRECT,
        statement.READ_WHEN_ASKED,
        None,
    )
    assert fresh == statement.read_when_asked(0.5) != statement.read_when_asked(0.6)
