"""Benchmark: the index engine versus SQLite FTS5 and ripgrep (docs/targets.md).

On a generated corpus of ~40k small OKF documents with a Zipf vocabulary:

* `rebuild` (in process) versus an FTS5 (porter tokenizer) build of the same
  documents through Python's sqlite3 module, reading the same files;
* index bytes versus the FTS5 database;
* a cold `ctindex search` process (watch disabled: it reconciles first and
  finds nothing changed; and, when the daemon can run, with a clean daemon)
  versus `rg -l -i` over the same files; plus the query alone in a fresh
  process (open the generation, answer) to show the segment format's cost.

`run()` returns the Markdown section. Each corpus is generated once into the
temp folder and reused while bench/corpus_marker.py finds it as generated.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench import corpus_marker

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.policy.project import Project

DOCS = 40_000
PER_FOLDER = 100
VOCAB = 60_000
ZIPF_S = 1.07
RUNS = 5
SEARCH_RUNS = 7
ROOT = Path(tempfile.gettempdir()) / f"ctindex-bench-index-{DOCS}"
MARKER = ROOT.with_name(ROOT.name + ".complete")
WORDS = (40, 160)  # body words per document: ~1 KB files
# The same number of documents at the size of the public corpus the target
# names (38,404 pages in 15 MB, ~400 B each), where per-document costs weigh most.
SMALL_ROOT = Path(tempfile.gettempdir()) / f"ctindex-bench-small-{DOCS}"
SMALL_WORDS = (12, 50)
DUMPED_ROOT = Path(tempfile.gettempdir()) / f"ctindex-bench-dumped-{DOCS}"
TYPES = ["Metric", "Table", "Policy", "Reference", "Skill", "Dataset"]


# The syllables generated words are made of (bench/bench_folding.py shares them).
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "men",
    "sel",
    "dor",
    "an",
    "ve",
    "lu",
    "pra",
    "qui",
    "zo",
    "ter",
    "nal",
    "bi",
    "os",
    "cha",
    "ment",
    "ing",
    "ed",
    "tion",
    "er",
    "ly",
    "ble",
]


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = SYLLABLES
    words: dict[str, None] = {}
    while len(words) < VOCAB:
        words["".join(rng.choices(syllables, k=rng.choice((1, 2, 2, 3, 3, 4))))] = None
    return list(words)


SEED = 20261129
GENERATOR = 2  # bump when the text generated changes (bench/corpus_marker.py)
# Frontmatter shapes: "simple", one `key: value` line per field (the shape
# ctindex reads fastest), or "dumped", as YAML dumpers write concept
# frontmatter (fixtures/okf-bundles): a resource URL, a description folded
# over lines, block lists, a nested `generated:` mapping, `sources:` items.
SHAPES = ("simple", "dumped")


def make_corpus(
    root: Path = ROOT, words_per_doc: tuple[int, int] = WORDS, shape: str = "simple"
) -> Path:
    """~40k Markdown concept documents under root/kb (index.md at the top)."""
    params = {
        "generator": GENERATOR,
        "docs": DOCS,
        "per_folder": PER_FOLDER,
        "vocab": VOCAB,
        "zipf_s": ZIPF_S,
        "words": list(words_per_doc),
        "shape": shape,
        "seed": SEED,
    }
    if corpus_marker.reuse(root, root / "kb", params) is not None:
        return root
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    weights = [1.0 / (r + 1) ** ZIPF_S for r in range(len(vocab))]
    cum: list[float] = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)
    kb = root / "kb"
    kb.mkdir(parents=True)
    (kb / "index.md").write_text("# Benchmark bundle\n")
    (root / ".git").mkdir()
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}\n')
    tags = vocab[100:400]
    for i in range(DOCS):
        folder = kb / f"d{i // PER_FOLDER:03d}"
        if i % PER_FOLDER == 0:
            folder.mkdir()
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(*words_per_doc))
        title = " ".join(rng.choices(vocab, cum_weights=cum, k=3)).title()
        paras = [" ".join(words[j : j + 40]) + "." for j in range(0, len(words), 40)]
        if shape == "simple":
            head = (
                f"title: {title}\ntype: {rng.choice(TYPES)}\n"
                f"description: {' '.join(words[:8])}\n"
                f"tags: [{', '.join(rng.sample(tags, 3))}]\n"
            )
        else:
            head = _dumped_frontmatter(rng, i, title, words, rng.sample(tags, 3))
        text = f"---\n{head}---\n\n# {title}\n\n" + "\n\n".join(paras) + "\n"
        (folder / f"doc{i:05d}.md").write_text(text)
    corpus_marker.seal(root, kb, params, vocab_top=vocab[:2000])
    return root


def _dumped_frontmatter(
    rng: random.Random, i: int, title: str, words: list[str], tags: list[str]
) -> str:
    """Frontmatter as a YAML dumper writes it (width 80, indentless lists)."""
    description = textwrap.wrap(" ".join(words[:20]).capitalize() + ".", 66)
    source = words[-1]
    return (
        f"type: {rng.choice(TYPES)}\n"
        f"resource: https://catalog.example.com/v2/projects/{words[0]}/datasets/"
        f"{words[1]}/tables/doc{i:05d}\n"
        f"title: {title}\n"
        f"description: {description[0]}\n"
        + "".join(f"  {line}\n" for line in description[1:])
        + "tags:\n"
        + "".join(f"- {tag}\n" for tag in tags)
        + "generated:\n  by: reference_agent/gemini-3.5-flash\n"
        f"  at: '2026-07-{1 + i % 28:02d}T23:16:28+00:00'\n"
        f"sources:\n- id: {source}-doc\n  resource: https://github.com/{source}/{words[2]}\n"
        f"  title: {' '.join(words[3:6]).title()}\n"
    )


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms of this process and its reaped children) of one call."""
    import resource

    def used() -> float:
        me, kids = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    c0, t0 = used(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000, (used() - c0) * 1000


def _rebuild_with(project: Project, plan: Plan, *, pure: bool) -> None:
    """`rebuild` in process, with the native core or forced pure (CTINDEX_PURE)."""
    from ctindex.base import native_modules
    from ctindex.indexing.transaction import rebuild
    from ctindex.reconciler import native

    old = os.environ.get("CTINDEX_PURE")
    os.environ["CTINDEX_PURE"] = "1" if pure else "0"
    native.reset()
    native_modules.reset()
    try:
        rebuild(project, plan)
    finally:
        if old is None:
            del os.environ["CTINDEX_PURE"]
        else:
            os.environ["CTINDEX_PURE"] = old
        native.reset()
        native_modules.reset()


def _docs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "kb").rglob("*.md") if p.name != "index.md")


def split_frontmatter(text: str) -> tuple[str, str]:
    """(frontmatter, body) as a minimal indexer splits them: frontmatter only
    when the file opens with a `---` line and a closing one follows; any
    other file is all body (the peer must index the same text we do)."""
    if text.startswith("---\n"):
        head, sep, body = text[3:].partition("\n---\n")
        if sep:
            return head, body
    return "", text


def fts5_build(root: Path, db: Path) -> None:
    """The peer: read every file, split frontmatter like a minimal indexer, FTS5 insert."""
    if db.exists():
        db.unlink()
    con = sqlite3.connect(db)
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, body, "
        "tokenize='porter unicode61')"
    )
    rows = []
    for p in _docs(root):
        text = p.read_text("utf-8")
        head, body = split_frontmatter(text)
        title = next((ln[7:] for ln in head.splitlines() if ln.startswith("title: ")), p.stem)
        rows.append((str(p.relative_to(root)), title, body))
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()


def _index_bytes(root: Path) -> int:
    from ctindex.store.generation import read_manifest

    index = root / ".ct" / "okf"
    m = read_manifest(index)
    assert m is not None
    return (
        sum((index / n).stat().st_size for n in m.referenced())
        + (index / "MANIFEST").stat().st_size
    )


# Cold processes are measured as installed code runs: with cached bytecode.
# (PYTHONDONTWRITEBYTECODE, set in some sandboxes, makes every process
# recompile every module: ~30 ms more per command.)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _ctindex(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        check=False,
        env=_ENV,
    )


def _query_only(root: Path, query: str) -> None:
    code = (
        "import sys; from ctindex.search.execute import search_index; "
        "from ctindex.search.query import parse_query; "
        f"o = search_index(sys.argv[1] + '/.ct/okf', parse_query({query!r}), 10); "
        "print(o.total)"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, check=True, env=_ENV
    )


def run() -> str:
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    root = make_corpus()
    top = json.loads(MARKER.read_text())["vocab_top"]
    project = Project.at(root)
    plan = load_plan(project)
    db = Path(tempfile.gettempdir()) / "ctindex-bench-fts5.db"
    docs = len(_docs(root))
    source = sum(p.stat().st_size for p in _docs(root))

    # Interleaved rounds (a burst of outside load hits every side alike):
    # rebuild with the native core, rebuild forced pure, the FTS5 build.
    timings: dict[str, list[tuple[float, float]]] = {"native": [], "pure": [], "fts5": []}
    for _ in range(RUNS):
        timings["native"].append(_timed_cpu(lambda: _rebuild_with(project, plan, pure=False)))
        timings["pure"].append(_timed_cpu(lambda: _rebuild_with(project, plan, pure=True)))
        timings["fts5"].append(_timed_cpu(lambda: fts5_build(root, db)))
    small_wall, small_per_round, small_source = _native_vs_fts5(
        make_corpus(SMALL_ROOT, SMALL_WORDS), db.with_name("ctindex-bench-small-fts5.db")
    )
    dumped_wall, dumped_per_round, dumped_source = _native_vs_fts5(
        make_corpus(DUMPED_ROOT, SMALL_WORDS, shape="dumped"),
        db.with_name("ctindex-bench-dumped-fts5.db"),
    )
    _rebuild_with(project, plan, pure=False)  # the index measured and searched below
    ours_bytes, fts_bytes = _index_bytes(root), db.stat().st_size
    med = statistics.median
    wall = {k: med(t[0] for t in v) for k, v in timings.items()}
    cpu = {k: med(t[1] for t in v) for k, v in timings.items()}
    per_round = {
        k: med(a[0] / b[0] for a, b in zip(timings[k], timings["fts5"], strict=True))
        for k in ("native", "pure")
    }

    queries = [
        top[40],
        top[400],
        f"{top[30]} {top[300]}",
        f'"{top[3]} {top[5]}"',
        f"{top[60][:3]}*",
    ]
    _ctindex(root, "search", "warmup")
    search_ms = {
        q: _median_ms(lambda q=q: _ctindex(root, "search", q), SEARCH_RUNS) for q in queries
    }
    query_ms = {q: _median_ms(lambda q=q: _query_only(root, q), SEARCH_RUNS) for q in queries}
    rg = shutil.which("rg")
    rg_ms: dict[str, float] = {}
    if rg:
        for q in queries[:2]:
            rg_ms[q] = _median_ms(
                lambda q=q: subprocess.run(
                    [rg, "-l", "-i", q, str(root / "kb")], capture_output=True, check=False
                ),
                SEARCH_RUNS,
            )
    bare_ms = _median_ms(
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=_ENV), SEARCH_RUNS
    )
    daemon_ms = _daemon_search(root, queries[0])

    lines = [
        "## Index engine (`bench/bench_index.py`)",
        "",
        f"Generated corpus: {docs:,} documents, {source / 1e6:.1f} MB, Zipf vocabulary "
        f"({VOCAB:,} words, s = {ZIPF_S}). Medians of {RUNS} interleaved build rounds / "
        f"{SEARCH_RUNS} searches.",
        "",
        "| figure | ctindex | peer | ratio | target |",
        "| --- | --- | --- | --- | --- |",
        f"| rebuild, native core, vs FTS5 (porter) build | {wall['native']:,.0f} ms | "
        f"{wall['fts5']:,.0f} ms | {wall['native'] / wall['fts5']:.2f}x "
        f"(per round {per_round['native']:.2f}x) | ≤ 1.0x |",
        f"| rebuild, pure (`CTINDEX_PURE=1`), vs FTS5 | {wall['pure']:,.0f} ms | "
        f"{wall['fts5']:,.0f} ms | {wall['pure'] / wall['fts5']:.2f}x "
        f"(per round {per_round['pure']:.2f}x) | (reported) |",
        f"| CPU time of that rebuild (all processes), native / pure, vs FTS5 | "
        f"{cpu['native']:,.0f} / {cpu['pure']:,.0f} ms | {cpu['fts5']:,.0f} ms | "
        f"{cpu['native'] / cpu['fts5']:.2f}x / {cpu['pure'] / cpu['fts5']:.2f}x | - |",
        f"| index bytes vs FTS5 database | {ours_bytes / 1e6:.1f} MB | {fts_bytes / 1e6:.1f} MB | "
        f"{ours_bytes / fts_bytes:.2f}x | ≤ 1.0x |",
        f"| rebuild of {docs:,} ~{small_source / docs:.0f} B documents "
        f"({small_source / 1e6:.1f} MB), native, vs FTS5 | "
        f"{small_wall['native']:,.0f} ms | {small_wall['fts5']:,.0f} ms | "
        f"{small_wall['native'] / small_wall['fts5']:.2f}x (per round {small_per_round:.2f}x) "
        "| ≤ 1.0x |",
        f"| the same with frontmatter as YAML dumpers write it (~{dumped_source / docs:.0f} B "
        f"documents, like fixtures/okf-bundles), native, vs FTS5 | "
        f"{dumped_wall['native']:,.0f} ms | {dumped_wall['fts5']:,.0f} ms | "
        f"{dumped_wall['native'] / dumped_wall['fts5']:.2f}x "
        f"(per round {dumped_per_round:.2f}x) | (reported) |",
    ]
    for q in queries[:2]:
        if q in rg_ms:
            lines.append(
                f"| cold `search {q}` (watch off, nothing changed) vs `rg -l -i` | "
                f"{search_ms[q]:.0f} ms | {rg_ms[q]:.0f} ms | "
                f"{search_ms[q] / rg_ms[q]:.2f}x | (≤ 0.25x with a clean daemon) |"
            )
    if daemon_ms is not None and queries[0] in rg_ms:
        lines.append(
            f"| cold `search {queries[0]}` with a clean daemon vs `rg -l -i` | "
            f"{daemon_ms:.0f} ms | {rg_ms[queries[0]]:.0f} ms | "
            f"{daemon_ms / rg_ms[queries[0]]:.2f}x | ≤ 0.25x |"
        )
    if not rg:
        lines.append("| `rg` not installed: ripgrep comparison skipped | | | | |")
    lines += [
        "",
        "Per query, in a fresh process each time:",
        "",
        "| query | `ctindex search` (reconcile-on-query) | open generation + answer only |",
        "| --- | --- | --- |",
    ]
    for q in queries:
        lines.append(f"| `{q}` | {search_ms[q]:.0f} ms | {query_ms[q]:.0f} ms |")
    lines += [
        "",
        f"Bare `python -c pass` start: {bare_ms:.0f} ms (processes run with "
        "bytecode caching on, as an installed package does). "
        "With watching off every search walks and stats the corpus first "
        "(the reconciler); with a clean daemon that walk is replaced by the barrier.",
        "",
    ]
    return "\n".join(lines)


def _native_vs_fts5(root: Path, db: Path) -> tuple[dict[str, float], float, int]:
    """Interleaved native rebuilds and FTS5 builds of the corpus at `root`:
    (median wall ms by side, median per-round ratio, the corpus's bytes)."""
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project

    project = Project.at(root)
    plan = load_plan(project)
    rounds: dict[str, list[tuple[float, float]]] = {"native": [], "fts5": []}
    for _ in range(RUNS):
        rounds["native"].append(_timed_cpu(lambda: _rebuild_with(project, plan, pure=False)))
        rounds["fts5"].append(_timed_cpu(lambda: fts5_build(root, db)))
    wall = {k: statistics.median(t[0] for t in v) for k, v in rounds.items()}
    per_round = statistics.median(
        a[0] / b[0] for a, b in zip(rounds["native"], rounds["fts5"], strict=True)
    )
    return wall, per_round, sum(p.stat().st_size for p in _docs(root))


def _daemon_search(root: Path, query: str) -> float | None:
    """Median cold search with watching on and a clean daemon, or None if the
    daemon can not run here (then only the reconcile-on-query figure stands)."""
    cfg = root / ".ct" / "index.jsonc"
    try:
        cfg.write_text('{"version": 1, "watch": true}\n')
        _ctindex(root, "watch", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = _ctindex(root, "--json", "search", query)
            try:
                mode = json.loads(out.stdout)["freshness"]["mode"]
            except (ValueError, KeyError):
                return None
            if mode == "watcher-clean":
                # Steady state: the search fast path records only a config
                # stat older than the 2 s racy window (ctindex/policy/plan_record.py).
                time.sleep(max(0.0, cfg.stat().st_mtime + 2.2 - time.time()))
                _ctindex(root, "search", query)
                return _median_ms(lambda: _ctindex(root, "search", query), SEARCH_RUNS)
            time.sleep(0.5)
        return None
    finally:
        _ctindex(root, "watch", "stop")
        cfg.write_text('{"version": 1, "watch": false}\n')


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    print(run())
