"""ctindex/search/refs.py on its own: a ref is the bare ID unless a file of
the same ID sits in another scope, and `split` takes a ref apart by the
longest scope root that fits."""

from __future__ import annotations

from pathlib import Path

from ctindex.search.refs import ref, refs, split


def test_a_ref_is_bare_unless_another_scope_holds_the_id(tmp_path: Path) -> None:
    for root in ("a", "b", "a/deeper"):
        (tmp_path / root / "t").mkdir(parents=True)
    (tmp_path / "a" / "t" / "x.md").write_text("x")
    (tmp_path / "b" / "t" / "x.md").write_text("x")
    (tmp_path / "a" / "t" / "y.md").write_text("y")
    (tmp_path / "b" / "t" / "y.md").mkdir()  # a folder is no concept
    scopes = ("a", "b", "a/deeper")
    assert ref(tmp_path, scopes, "t/x", "a", "a/t/x.md") == "a:t/x"
    assert ref(tmp_path, scopes, "t/x", "b", "b/t/x.md") == "b:t/x"
    assert ref(tmp_path, scopes, "t/y", "a", "a/t/y.md") == "t/y"
    assert ref(tmp_path, ("a",), "t/x", "a", "a/t/x.md") == "t/x"  # one scope: never qualified
    assert ref(tmp_path, scopes, "t/x", "a", "elsewhere.md") == "t/x"  # no ROOT/ID+suffix key
    assert refs(tmp_path, scopes, [("t/x", "a", "a/t/x.md"), ("t/y", "a", "a/t/y.md")]) == [
        "a:t/x",
        "t/y",
    ]


def test_split_takes_the_longest_root_and_leaves_other_text_alone() -> None:
    roots = ["a", "a/deeper", "b"]
    assert split(roots, "a:t/x") == ("a", "t/x")
    assert split(roots, "a/deeper:t/x") == ("a/deeper", "t/x")
    assert split(roots, "c:t/x") is None
    assert split(roots, "t/x") is None
    assert split(roots, "a:") == ("a", "")
