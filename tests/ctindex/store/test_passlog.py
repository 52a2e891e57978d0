"""store/passlog.py: the records of the last passes, for `status`."""

from __future__ import annotations

from pathlib import Path

from ctindex.store.generation import StoreManifest
from ctindex.store.passlog import FULL_STATUS_NAME, STATUS_NAME, last_pass, record_pass


def test_a_narrowed_pass_does_not_hide_the_last_full_one(tmp_path: Path) -> None:
    record_pass(tmp_path, {"kind": "full", "at_ns": 1})
    record_pass(tmp_path, {"kind": "narrowed", "at_ns": 2})
    assert last_pass(tmp_path, None)["kind"] == "narrowed"
    assert last_pass(tmp_path, None, full=True) == {"kind": "full", "at_ns": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([STATUS_NAME, FULL_STATUS_NAME])


def test_the_newer_of_manifest_and_record_wins(tmp_path: Path) -> None:
    m = StoreManifest(generation=1)
    m.reconcile = {"kind": "rebuild", "at_ns": 5}
    record_pass(tmp_path, {"kind": "full", "at_ns": 3})
    assert last_pass(tmp_path, m)["kind"] == "rebuild"
    record_pass(tmp_path, {"kind": "full", "at_ns": 9})
    assert last_pass(tmp_path, m)["at_ns"] == 9


def test_an_unwritable_folder_is_skipped_silently(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    record_pass(missing, {"kind": "full", "at_ns": 1})  # best effort: no error
    assert last_pass(missing, None) == {}


def test_a_record_with_a_garbled_time_loses_instead_of_failing(tmp_path: Path) -> None:
    """A status file edited by hand (`at_ns` not a number) counts as one
    that does not say when it ran, like one without `at_ns`: the manifest's
    pass outranks it, and alone it is no record. `status` never fails on it."""
    (tmp_path / STATUS_NAME).write_text('{"kind": "full", "at_ns": "yesterday"}')
    m = StoreManifest(generation=1)
    m.reconcile = {"kind": "rebuild", "at_ns": 5}
    assert last_pass(tmp_path, m) == {"kind": "rebuild", "at_ns": 5}
    assert last_pass(tmp_path, None) == {}
