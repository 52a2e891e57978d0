"""The benches' generated corpora: reused only while they are what their
generator made (bench/corpus_marker.py), and the "dumped" frontmatter shape
is what a YAML dumper writes, read by ctindex without libyaml."""

from __future__ import annotations

import random
from pathlib import Path

from bench import corpus_marker
from bench.bench_index import _dumped_frontmatter
from ctindex.providers import frontmatter as fm


def _tree(root: Path) -> Path:
    tree = root / "kb"
    tree.mkdir(parents=True)
    (tree / "a.md").write_text("alpha\n")
    (tree / "sub").mkdir()
    (tree / "sub" / "b.md").write_text("beta beta\n")
    return tree


def test_a_sealed_corpus_is_reused_with_its_record(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    tree = _tree(root)
    corpus_marker.seal(root, tree, {"docs": 2}, vocab_top=["x"])
    record = corpus_marker.reuse(root, tree, {"docs": 2})
    assert record is not None and record["vocab_top"] == ["x"]
    assert (record["files"], record["bytes"]) == (2, 16)


def test_a_changed_corpus_or_generator_is_generated_again(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    tree = _tree(root)
    corpus_marker.seal(root, tree, {"docs": 2})
    assert corpus_marker.reuse(root, tree, {"docs": 3}) is None  # other parameters
    assert not root.exists() and not corpus_marker.marker_of(root).exists()

    tree = _tree(root)
    corpus_marker.seal(root, tree, {"docs": 2})
    (tree / "a.md").write_text("a harness's own text\n")  # rewritten in place
    assert corpus_marker.reuse(root, tree, {"docs": 2}) is None

    tree = _tree(root)
    corpus_marker.seal(root, tree, {"docs": 2})
    (tree / "sub" / "b.md").unlink()  # an interrupted copy
    assert corpus_marker.reuse(root, tree, {"docs": 2}) is None

    tree = _tree(root)  # never sealed: an interrupted generation
    assert corpus_marker.reuse(root, tree, {"docs": 2}) is None


def test_dumped_frontmatter_is_read_without_yaml_as_libyaml_reads_it() -> None:
    rng = random.Random(7)
    words = [f"w{n}" for n in range(40)]
    for i in range(50):
        block = _dumped_frontmatter(rng, i, f"Title {i}", words[i % 5 :], ["t1", "t2", "t3"])
        got = fm.read_without_yaml(block)
        assert got is not None and got == fm.load_yaml(block)
        assert got["tags"] == ["t1", "t2", "t3"] and "\n" not in got["description"]
