"""Query cost in one run: `python -m bench.search_speed [--write docs/benchmarks.md]`.

On a generated corpus of DOCS small OKF documents (bench/bench_index.py's
Zipf vocabulary) plus two large pages (~280 KB each) that share a rare word
and hold the frequent ones thousands of times, side by side, medians and p95:

* in process, over the same QUERIES queries (cycling over shapes: one word
  at several frequencies, two- and five-word ANDs, a phrase, a prefix, an
  OR, a rare-and-frequent AND, and queries the two large pages match):
  `ctindex.Index.search` with a clean daemon (every query still asks the
  barrier), SQLite FTS5 (porter, bm25 with title x3, a snippet per row) and
  Tantivy (en_stem, title boost 3, the stored key read per hit), each
  answering the first ten results;
* one process per query: `ctindex search` answered by the daemon versus a
  Python script that opens the FTS5 database and runs the same query.

The large-document queries are also reported on their own. `--write FILE`
replaces the section between this module's markers in FILE; `bench.run`
keeps it when it rewrites the file.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import corpus_marker

START, END = "<!-- search-speed:start -->", "<!-- search-speed:end -->"
DOCS = 10_000
BIG_BYTES = 280_000
QUERIES = 240
PROCESS_RUNS = 21
LIMIT = 10
ROOT = Path(tempfile.gettempdir()) / f"ctindex-bench-search-{DOCS}"
RARE = "zephyrquill"  # only in the two large pages
CONFIG_ON = '{"version": 1, "watch": true}\n'


def make_corpus(root: Path = ROOT) -> tuple[Path, list[str]]:
    """The corpus (reused while it is what this generator made) and the
    vocabulary by frequency rank."""
    from bench.bench_index import PER_FOLDER, SEED, TYPES, ZIPF_S, _vocabulary

    params = {"docs": DOCS, "big": BIG_BYTES, "seed": SEED, "zipf_s": ZIPF_S, "v": 1}
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    if corpus_marker.reuse(root, root / "kb", params) is not None:
        return root, vocab
    cum: list[float] = []
    total = 0.0
    for r in range(len(vocab)):
        total += 1.0 / (r + 1) ** ZIPF_S
        cum.append(total)
    kb = root / "kb"
    kb.mkdir(parents=True)
    (kb / "index.md").write_text("# Search benchmark\n")
    (root / ".git").mkdir()
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text(CONFIG_ON)
    for i in range(DOCS):
        folder = kb / f"d{i // PER_FOLDER:03d}"
        folder.mkdir(exist_ok=True)
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(40, 160))
        title = " ".join(rng.choices(vocab, cum_weights=cum, k=3)).title()
        body = "\n\n".join(" ".join(words[j : j + 40]) + "." for j in range(0, len(words), 40))
        (folder / f"doc{i:05d}.md").write_text(
            f"---\ntitle: {title}\ntype: {rng.choice(TYPES)}\n"
            f"description: {' '.join(words[:8])}\n---\n\n# {title}\n\n{body}\n"
        )
    big = kb / "big"
    big.mkdir()
    for name in ("manual-a", "manual-b"):
        parts: list[str] = []
        size = 0
        while size < BIG_BYTES:
            para = " ".join(rng.choices(vocab, cum_weights=cum, k=60)) + ".\n\n"
            parts.append(para)
            size += len(para)
        parts.insert(len(parts) // 2, f"The {RARE} section.\n\n")
        (big / f"{name}.md").write_text(
            f"---\ntitle: Manual {name[-1].upper()}\ntype: Reference\n---\n\n" + "".join(parts)
        )
    corpus_marker.seal(root, kb, params)
    return root, vocab


def query_shapes(vocab: Sequence[str]) -> tuple[list[str], list[str]]:
    """(all queries, the large-document ones), in ctindex's syntax, which is
    FTS5's for these shapes; Tantivy's is `tantivy_form`."""
    big = [RARE, f"{RARE} {vocab[0]}", f"{vocab[1]} {vocab[2]} {vocab[3]} {vocab[4]} {RARE}"]
    shapes = [
        vocab[40],
        vocab[400],
        vocab[4000],
        f"{vocab[5]} {vocab[9]}",
        f"{vocab[30]} {vocab[31]}",
        f"{vocab[1]} {vocab[3]} {vocab[6]} {vocab[10]} {vocab[15]}",
        f'"{vocab[3]} {vocab[5]}"',
        f"{vocab[60][:3]}*",
        f"{vocab[20]} OR {vocab[21]}",
        f"{vocab[0]} {vocab[3000]}",
        *big,
    ]
    return [shapes[i % len(shapes)] for i in range(QUERIES)], big


def tantivy_form(q: str) -> str:
    if " OR " in q or '"' in q or q.endswith("*"):
        return q
    return " ".join("+" + w for w in q.split())


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(fn: Callable[[str], object], queries: Sequence[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _read_docs(root: Path) -> list[tuple[str, str, str]]:
    from bench.bench_index import split_frontmatter

    rows = []
    for p in sorted((root / "kb").rglob("*.md")):
        head, body = split_frontmatter(p.read_text("utf-8"))
        title = next((ln[7:] for ln in head.splitlines() if ln.startswith("title: ")), p.stem)
        rows.append((str(p.relative_to(root)), title, body))
    return rows


def fts5_db(rows: Sequence[tuple[str, str, str]], path: Path) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, body, "
        "tokenize='porter unicode61')"
    )
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()


FTS_SQL = (
    "SELECT path, title, snippet(docs, 2, '«', '»', '…', 24) FROM docs WHERE docs MATCH ? "
    "ORDER BY bm25(docs, 0, 3.0, 1.0) LIMIT 10"
)


def tantivy_search(rows: Sequence[tuple[str, str, str]]) -> Callable[[str], object]:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("path", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=True, tokenizer_name="en_stem")
    sb.add_text_field("body", tokenizer_name="en_stem")
    index = tantivy.Index(sb.build())
    writer = index.writer(heap_size=128_000_000, num_threads=1)
    for path, title, body in rows:
        writer.add_document(tantivy.Document(path=path, title=title, body=body))
    writer.commit()
    index.reload()
    searcher = index.searcher()

    def run(q: str) -> object:
        query = index.parse_query(tantivy_form(q), ["title", "body"], field_boosts={"title": 3.0})
        return [searcher.doc(a)["path"][0] for _, a in searcher.search(query, LIMIT).hits]

    return run


def _ctindex(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    from bench.bench_daemon import _ctindex as run

    return run(root, *args)


FTS_SCRIPT = (
    "import sqlite3, sys\n"
    "con = sqlite3.connect(sys.argv[1])\n"
    "for row in con.execute(sys.argv[3], (sys.argv[2],)):\n"
    "    print(*row)\n"
)


def measure() -> str:
    import ctindex
    from bench.bench_daemon import _steady, _wait_clean
    from bench.bench_index import _ENV

    root, vocab = make_corpus()
    queries, big = query_shapes(vocab)
    rows = _read_docs(root)
    db = root.with_name(root.name + ".fts5.db")
    fts5_db(rows, db)
    con = sqlite3.connect(db)
    tv = tantivy_search(rows)
    (root / ".ct" / "index.jsonc").write_text(CONFIG_ON)
    _ctindex(root, "update")
    _ctindex(root, "watch", "start")
    try:
        _wait_clean(root, queries[0])
        _steady(root, queries[0])
        with ctindex.Index(root) as index:
            for q in queries[: len(set(queries))]:
                index.search(q, limit=LIMIT)
            engines: dict[str, Callable[[str], object]] = {
                "ctindex `Index.search`": lambda q: index.search(q, limit=LIMIT),
                "SQLite FTS5": lambda q: con.execute(FTS_SQL, (q,)).fetchall(),
                "Tantivy": tv,
            }
            for fn in engines.values():  # warm every engine before any is timed
                _ms(fn, queries[: len(set(queries))])
            inproc = {name: _ms(fn, queries) for name, fn in engines.items()}
            bigs = {name: _ms(fn, big * 20) for name, fn in engines.items()}
            modes = {index.search(queries[0]).freshness.mode}
        py = sys.executable
        proc_ct: list[float] = []
        proc_fts: list[float] = []
        for i in range(PROCESS_RUNS):  # interleaved: machine load hits both alike
            q = queries[i % 10]
            t0 = time.perf_counter()
            subprocess.run(
                [py, "-m", "ctindex", "-C", str(root), "search", q],
                capture_output=True,
                env=_ENV,
                check=False,
            )
            proc_ct.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            subprocess.run(
                [py, "-c", FTS_SCRIPT, str(db), q, FTS_SQL],
                capture_output=True,
                env=_ENV,
                check=False,
            )
            proc_fts.append((time.perf_counter() - t0) * 1000)
    finally:
        _ctindex(root, "watch", "stop")
    docs = len(rows)
    lines = [
        START,
        "## Query cost (`bench/search_speed.py`)",
        "",
        f"{docs:,} documents ({DOCS:,} generated pages of ~1 KB and two of "
        f"~{BIG_BYTES // 1000} KB); {QUERIES} queries cycling over {len(set(queries))} "
        "shapes, first ten results each (ctindex with snippets, FTS5 with `snippet()`, "
        f"Tantivy reading each hit's stored path); ctindex freshness: {', '.join(modes)}. "
        f"Large-document rows: the {len(big)} queries both large pages match, 20 times each.",
        "",
        "| figure | p50 | p95 |",
        "| --- | --- | --- |",
    ]
    for name, samples in inproc.items():
        lines.append(
            f"| {name} in process | {statistics.median(samples):.2f} ms "
            f"| {_pct(samples, 0.95):.2f} ms |"
        )
    for name, samples in bigs.items():
        lines.append(
            f"| {name} in process, large-document queries | "
            f"{statistics.median(samples):.2f} ms | {_pct(samples, 0.95):.2f} ms |"
        )
    ratio = statistics.median(proc_ct) / statistics.median(proc_fts)
    lines += [
        f"| `ctindex search` process, clean daemon ({PROCESS_RUNS} runs) | "
        f"{statistics.median(proc_ct):.1f} ms | {_pct(proc_ct, 0.95):.1f} ms |",
        f"| FTS5 script process, same queries ({PROCESS_RUNS} runs) | "
        f"{statistics.median(proc_fts):.1f} ms | {_pct(proc_fts, 0.95):.1f} ms |",
        "",
        f"Process per query, ctindex / FTS5 script (medians): {ratio:.2f}x.",
        "",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.search_speed", description=__doc__)
    p.add_argument("--write", type=Path, metavar="FILE")
    args = p.parse_args(argv)
    section = measure()
    print(section)
    if args.write:
        from bench.relevance import write_section

        write_section(args.write, section, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
