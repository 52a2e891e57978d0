"""The FTS5 peer of bench/bench_index.py indexes the same text ctindex
does: a file without frontmatter is all body (before, such a file indexed
no body text at all, which flattered the peer's build time)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench.bench_index import fts5_build


def test_fts5_peer_indexes_the_body_of_files_without_frontmatter(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "index.md").write_text("# kb\n")
    (kb / "plain.md").write_text("# Plain\n\nzqxv7marker in a page without frontmatter\n")
    (kb / "front.md").write_text("---\ntitle: Front\n---\n\nzqxv7marker below frontmatter\n")
    (kb / "rule.md").write_text("# Rule\n\ntext\n---\nzqxv7marker after a rule\n")
    db = tmp_path / "peer.db"
    fts5_build(tmp_path, db)
    con = sqlite3.connect(db)
    hits = sorted(r[0] for r in con.execute("SELECT path FROM docs WHERE docs MATCH 'zqxv7marker'"))
    con.close()
    assert hits == ["kb/front.md", "kb/plain.md", "kb/rule.md"]
