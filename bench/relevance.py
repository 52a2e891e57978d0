"""Relevance harness: `nox -s relevance` (`python -m bench.relevance`).

Known-item query sets are built from public corpora, and ctindex is measured
side by side with SQLite FTS5's ``bm25()`` (column weights, porter stemmer)
on the same documents and the same queries, in one run:

* **top-1**: the share of queries whose known item is ranked first;
* **MRR@10**: the mean of 1/rank of the known item (0 beyond rank 10);
* **all-words recall**: the share of the documents holding every query word
  literally (a regular expression over title, tags, description and body,
  no stemming: the set both engines must at least return) that the engine
  returns anywhere in its answer, not only in the first ten.

Corpora:

* ``okf``: the four OKF bundles in ``fixtures/okf-bundles`` (committed);
* ``npm``: every Markdown file of an npm dependency tree (``eslint``,
  ``webpack``, ``jest`` and ``npm`` itself, whose CLI documentation carries
  YAML frontmatter), installed at run time with ``npm install`` into a cache
  folder and reused while the package list is unchanged; never committed.
  A package README's title is the package's name, so the queries are bare
  names (``debug``, ``semver``, ``chalk``) like command names on a help-page
  corpus, the shape BM25 gets wrong when longer pages mention the name often.

Query sets (documents whose title is shared by another document, or holds no
word, are left out: they have no single known item):

* ``title``: the words of a document's title;
* ``name``: the ``title`` queries of one word (a bare name);
* ``multi``: the ``title`` queries of two words or more;
* ``passage``: the first four words of a document's description (or of its
  body's first line of prose) as a plain AND, a user remembering a sentence:
  no title tier decides, so this is where word proximity can matter. Left
  out when another document holds the same four words consecutively;
* ``id``: a document's concept ID as typed (``tables/transactions``), OKF only;
* ``readme``: the README's own example ``"gross margin" OR revenue*``, whose
  known item is ``metrics/revenue``.

``--proximity W`` sets ctindex's proximity weight for the run (an experiment:
``0`` measures without it, docs/search.md "Proximity").

``--write FILE`` replaces the section between the relevance markers of FILE
(``docs/benchmarks.md``); ``bench.run`` keeps that section when it rewrites
the file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUNDLES = REPO / "fixtures" / "okf-bundles"
NPM_PACKAGES = ("eslint@9", "webpack@5", "jest@29", "npm@11")
START, END = "<!-- relevance:start -->", "<!-- relevance:end -->"
LIMIT = 10
_WORD = re.compile(r"[^\W_]+")
# FTS5 column order and weights, the same weights as ctindex's fields
# (docs/search.md, "Ranking"): title, concept ID, tags, description, body.
FTS_COLUMNS = ("title", "cid", "tags", "description", "body")
FTS_WEIGHTS = (3.0, 3.0, 2.0, 2.0, 1.0)


class Doc(NamedTuple):
    key: str
    cid: str
    title: str
    tags: tuple[str, ...]
    description: str
    body: str


class Query(NamedTuple):
    text: str  # ctindex syntax
    fts: str  # FTS5 MATCH expression
    target: str  # the known item's key
    words: tuple[str, ...]  # the words every all-words-set document holds


class Scores(NamedTuple):
    top1: float
    mrr: float
    recall: float
    n: int


# -- corpora -----------------------------------------------------------------------


def okf_project(work: Path) -> Path:
    root = work / "okf"
    shutil.copytree(BUNDLES, root / "okf" / "bundles")
    (root / ".git").mkdir()
    return root


def npm_cache() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = hashlib.sha256(" ".join(NPM_PACKAGES).encode()).hexdigest()[:12]
    return base / "ctindex-relevance" / f"npm-{tag}"


def npm_install(cache: Path, timeout: float = 900.0) -> Path:
    """The packages' tree, installed once (npm's ordinary client; bounded)."""
    done = cache / ".complete"
    if not done.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("bench.relevance: npm is not installed (apt-get install npm)")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(cache),
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--no-save",
                "--loglevel=error",
                *NPM_PACKAGES,
            ],
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
        )
        done.write_text("ok\n")
    return cache / "node_modules"


def npm_project(work: Path, tree: Path) -> Path:
    """Every Markdown file of the tree under one scope. `node_modules` is
    renamed `pkgs` on the way: it is excluded by default (docs/decisions/policy.md)."""
    root = work / "npm"
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "index.md").write_text("# npm packages\n")
    (root / ".git").mkdir()
    for path in sorted(tree.rglob("*.md")):
        if not path.is_file() or path.is_symlink() or path.name in ("index.md", "log.md"):
            continue
        rel = path.relative_to(tree).as_posix().replace("node_modules", "pkgs")
        dest = corpus / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return root


def load_docs(root: Path) -> list[Doc]:
    """The documents as ctindex's provider reads them (the same fields feed FTS5)."""
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project
    from ctindex.search.direct import read_documents

    docs, _ = read_documents(str(root), load_plan(Project.at(root)))
    return [Doc(d.key, d.concept_id, d.title, d.tags, d.description, d.body) for d in docs]


# -- query sets --------------------------------------------------------------------


def _fts_and(words: Iterable[str]) -> str:
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def title_queries(docs: Sequence[Doc]) -> list[Query]:
    seen: dict[str, int] = {}
    for d in docs:
        k = " ".join(_WORD.findall(d.title.casefold()))
        seen[k] = seen.get(k, 0) + 1
    out = []
    for d in docs:
        words = tuple(_WORD.findall(d.title))
        key = " ".join(w.casefold() for w in words)
        if not words or seen[key] != 1:
            continue
        # Lower-cased so that a title word OR / AND stays a word.
        text = " ".join(w.lower() if w in ("OR", "AND") else w for w in words)
        out.append(Query(text, _fts_and(words), d.key, tuple(w.casefold() for w in words)))
    return out


def _title_df(docs: Sequence[Doc]) -> dict[str, int]:
    """Document frequency of each casefolded word over every field."""
    df: dict[str, int] = {}
    for d in docs:
        for w in set(
            _WORD.findall("\n".join((d.title, *d.tags, d.description, d.body)).casefold())
        ):
            df[w] = df.get(w, 0) + 1
    return df


def _partial(
    docs: Sequence[Doc], pick: Callable[[list[str], dict[str, int]], list[str]]
) -> list[Query]:
    """Queries of some of a title's words (`pick` chooses them, in title
    order). Left out when another document's title holds every chosen word
    too: then the query names no single known item."""
    df = _title_df(docs)
    titles = [(d, [w.casefold() for w in _WORD.findall(d.title)]) for d in docs]
    out = []
    for q in title_queries(docs):
        words = list(q.words)
        chosen = pick(words, df)
        if not chosen or chosen == words:
            continue
        want = set(chosen)
        if any(o.key != q.target and want <= set(ws) for o, ws in titles):
            continue
        out.append(Query(" ".join(chosen), _fts_and(chosen), q.target, tuple(chosen)))
    return out


def _without_most_common(words: list[str], df: dict[str, int]) -> list[str]:
    if len(words) < 2:
        return []
    drop = max(range(len(words)), key=lambda i: (df.get(words[i], 0), -i))
    return words[:drop] + words[drop + 1 :]


def _two_rarest(words: list[str], df: dict[str, int]) -> list[str]:
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    if len(first) < 3:
        return []
    keep = sorted(first.values(), key=lambda i: (df.get(words[i], 0), i))[:2]
    return [words[i] for i in sorted(keep)]


def partial_common_queries(docs: Sequence[Doc]) -> list[Query]:
    """A title without its most common word (by document frequency)."""
    return _partial(docs, _without_most_common)


def partial_rare_queries(docs: Sequence[Doc]) -> list[Query]:
    """A title's two rarest words (titles of three distinct words or more)."""
    return _partial(docs, _two_rarest)


def id_queries(docs: Sequence[Doc]) -> list[Query]:
    count: dict[str, int] = {}
    for d in docs:
        count[d.cid] = count.get(d.cid, 0) + 1
    out = []
    for d in docs:
        words = tuple(_WORD.findall(d.cid))
        if count[d.cid] == 1 and "/" in d.cid and words:
            out.append(Query(d.cid, _fts_and(words), d.key, ()))
    return out


PASSAGE_WORDS = 4


def _prose_line(d: Doc) -> str:
    """The description, or else the body's first line of prose (at least
    eight words; headings, fences, tables, lists, quotes and HTML aside)."""
    if len(_WORD.findall(d.description)) >= PASSAGE_WORDS:
        return d.description
    for line in d.body.splitlines():
        text = line.strip()
        if (
            text
            and text[0] not in "#`|<>[!-*+=~"
            and "](" not in text
            and len(_WORD.findall(text)) >= 8
        ):
            return text
    return ""


def passage_queries(docs: Sequence[Doc], n: int = PASSAGE_WORDS, skip: int = 0) -> list[Query]:
    """`n` consecutive words of a document's description (or first line of
    prose) from its `skip`-th word on, as an AND of words: a user
    remembering a sentence. The words stand together in the known item; no
    title tier decides. Left out when another document holds the same words
    consecutively too."""
    grams: dict[tuple[str, ...], int] = {}
    for d in docs:
        ws = [
            w.casefold()
            for w in _WORD.findall("\n".join((d.title, *d.tags, d.description, d.body)))
        ]
        for g in {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)}:
            grams[g] = grams.get(g, 0) + 1
    out = []
    for d in docs:
        words = tuple(_WORD.findall(_prose_line(d)))[skip : skip + n]
        if len(words) < n or grams.get(tuple(w.casefold() for w in words)) != 1:
            continue
        text = " ".join(w.lower() if w in ("OR", "AND", "NOT") else w for w in words)
        out.append(Query(text, _fts_and(words), d.key, tuple(w.casefold() for w in words)))
    return out


SENTENCE_WORDS, SENTENCE_SKIP = 6, 3


def sentence_queries(docs: Sequence[Doc]) -> list[Query]:
    """Six words from inside the same line (from its fourth word on): a
    sentence remembered from its middle rather than its start."""
    return passage_queries(docs, SENTENCE_WORDS, SENTENCE_SKIP)


def readme_queries(docs: Sequence[Doc]) -> list[Query]:
    out = []
    for d in docs:
        if d.cid == "metrics/revenue":
            out.append(Query('"gross margin" OR revenue*', '"gross margin" OR revenue*', d.key, ()))
    return out


# -- engines -----------------------------------------------------------------------

Engine = Callable[[Query], tuple[list[str], set[str]]]  # (ranked keys, all matches)


def ctindex_engine(root: Path) -> Engine:
    from ctindex.indexing.transaction import update
    from ctindex.policy.plan import load_plan
    from ctindex.policy.project import Project
    from ctindex.search.execute import search_index
    from ctindex.search.query import parse_query

    project = Project.at(root)
    (root / ".ct").mkdir(exist_ok=True)
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    update(project, load_plan(project))

    def run(q: Query) -> tuple[list[str], set[str]]:
        got = search_index(project.index_dir, parse_query(q.text), LIMIT, want_keys=True)
        return [r.path for r in got.results], set(got.keys)

    return run


def fts5_engine(docs: Sequence[Doc]) -> Engine:
    db = sqlite3.connect(":memory:")
    cols = ", ".join(FTS_COLUMNS)
    db.execute(
        f"CREATE VIRTUAL TABLE d USING fts5(key UNINDEXED, {cols}, tokenize='porter unicode61')"
    )
    db.executemany(
        "INSERT INTO d VALUES (?, ?, ?, ?, ?, ?)",
        [
            (d.key, d.title, d.cid.replace("/", " "), " ".join(d.tags), d.description, d.body)
            for d in docs
        ],
    )
    weights = ", ".join(str(w) for w in FTS_WEIGHTS)

    def run(q: Query) -> tuple[list[str], set[str]]:
        rows = db.execute(
            f"SELECT key FROM d WHERE d MATCH ? ORDER BY bm25(d, 0, {weights}), key", (q.fts,)
        ).fetchall()
        keys = [r[0] for r in rows]
        return keys[:LIMIT], set(keys)

    return run


TANTIVY_TITLE_BOOST = 3.0


def tantivy_engine(docs: Sequence[Doc]) -> Engine:
    """Tantivy (the `tantivy` package, a bench-only dependency): the same
    fields, the en_stem tokenizer, title boost 3; every word required."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw")
    for col in FTS_COLUMNS:
        sb.add_text_field(col, tokenizer_name="en_stem")
    index = tantivy.Index(sb.build())
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for d in docs:
        writer.add_document(
            tantivy.Document(
                key=d.key,
                title=d.title,
                cid=d.cid.replace("/", " "),
                tags=" ".join(d.tags),
                description=d.description,
                body=d.body,
            )
        )
    writer.commit()
    index.reload()
    searcher = index.searcher()
    boosts = {"title": TANTIVY_TITLE_BOOST}

    def run(q: Query) -> tuple[list[str], set[str]]:
        text = " ".join("+" + w for w in q.words) if q.words else q.fts
        try:
            query = index.parse_query(text, list(FTS_COLUMNS), field_boosts=boosts)
        except ValueError:
            return [], set()
        hits = searcher.search(query, max(len(docs), 1)).hits
        ranked = sorted(((-s, searcher.doc(a)["key"][0]) for s, a in hits))
        keys = [k for _, k in ranked]
        return keys[:LIMIT], set(keys)

    return run


def word_sets(docs: Sequence[Doc]) -> dict[str, frozenset[str]]:
    """Each document's literal words (casefolded, no stemming)."""
    return {
        d.key: frozenset(
            w.casefold()
            for w in _WORD.findall("\n".join((d.title, *d.tags, d.description, d.body)))
        )
        for d in docs
    }


def all_words_set(words_of: dict[str, frozenset[str]], words: Sequence[str]) -> set[str]:
    """Documents holding every word literally (no stemming, whole words)."""
    want = set(words)
    return {key for key, have in words_of.items() if want <= have}


def score(engine: Engine, queries: Sequence[Query], truth: Sequence[set[str]]) -> Scores:
    top1 = mrr = 0.0
    rec_sum, rec_n = 0.0, 0
    for q, want in zip(queries, truth, strict=True):
        ranked, matched = engine(q)
        if ranked and ranked[0] == q.target:
            top1 += 1
        if q.target in ranked:
            mrr += 1.0 / (ranked.index(q.target) + 1)
        if want:
            rec_sum += len(want & matched) / len(want)
            rec_n += 1
    n = max(len(queries), 1)
    return Scores(top1 / n, mrr / n, rec_sum / rec_n if rec_n else 1.0, len(queries))


def misses(engine: Engine, queries: Sequence[Query], limit: int = 5) -> list[str]:
    out = []
    for q in queries:
        ranked, _ = engine(q)
        if not ranked or ranked[0] != q.target:
            where = ranked.index(q.target) + 1 if q.target in ranked else "-"
            out.append(f"`{q.text}` → known item at rank {where}")
            if len(out) >= limit:
                break
    return out


# -- report ------------------------------------------------------------------------


ENGINES = ("ctindex", "FTS5", "Tantivy")


def query_sets(name: str, docs: Sequence[Doc]) -> dict[str, list[Query]]:
    sets = {"title": title_queries(docs)}
    sets["name"] = [q for q in sets["title"] if len(q.words) == 1]
    sets["multi"] = [q for q in sets["title"] if len(q.words) > 1]
    sets["partial-common"] = partial_common_queries(docs)
    sets["partial-rare"] = partial_rare_queries(docs)
    sets["passage"] = passage_queries(docs)
    sets["sentence"] = sentence_queries(docs)
    if name == "okf":
        sets["id"] = id_queries(docs)
        sets["readme"] = readme_queries(docs)
    return sets


def measure(work: Path, corpora: Sequence[str], label: str = "") -> str:
    lines = [
        START,
        "## Relevance (`bench/relevance.py`, `nox -s relevance`)",
        "",
        "Known-item queries; ctindex, SQLite FTS5 `bm25()` (porter unicode61, column "
        f"weights title {FTS_WEIGHTS[0]:g}, ID {FTS_WEIGHTS[1]:g}, tags "
        f"{FTS_WEIGHTS[2]:g}, description {FTS_WEIGHTS[3]:g}, body {FTS_WEIGHTS[4]:g}) "
        f"and Tantivy (en_stem, title boost {TANTIVY_TITLE_BOOST:g}) over the same "
        "documents and queries in one run. Targets: exact titles and IDs top-1 1.000; "
        "partial titles top-1 ≥ Tantivy's; OKF title top-1 ≥ 0.95."
        + (f" ctindex ranking: {label}." if label else ""),
        "",
        "| corpus | queries | n | top-1 ctindex | FTS5 | Tantivy | MRR@10 ctindex "
        "| FTS5 | Tantivy | all-words recall ctindex | FTS5 | Tantivy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes: list[str] = []
    for name in corpora:
        started = time.perf_counter()
        root = okf_project(work) if name == "okf" else npm_project(work, npm_install(npm_cache()))
        docs = load_docs(root)
        engines = (ctindex_engine(root), fts5_engine(docs), tantivy_engine(docs))
        words_of = word_sets(docs)
        for set_name, queries in query_sets(name, docs).items():
            if not queries:
                continue
            truth = [all_words_set(words_of, q.words) if q.words else set() for q in queries]
            got = [score(e, queries, truth) for e in engines]
            recall = (
                " | ".join(f"{g.recall:.3f}" for g in got)
                if queries[0].words
                else "n/a | n/a | n/a"
            )
            lines.append(
                f"| {name} ({len(docs)} docs) | {set_name} | {got[0].n} | "
                + " | ".join(f"{g.top1:.3f}" for g in got)
                + " | "
                + " | ".join(f"{g.mrr:.3f}" for g in got)
                + f" | {recall} |"
            )
            missed = misses(engines[0], queries)
            if missed:
                notes.append(
                    f"- ctindex misses, {name}/{set_name} (first {len(missed)}): "
                    + "; ".join(missed)
                )
        print(
            f"bench.relevance: {name} measured in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    lines += ["", *notes, "", END]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str, start: str = START, end: str = END) -> None:
    """Replace the section between `start` and `end` in `path` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.relevance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--corpus",
        action="append",
        choices=("okf", "npm"),
        help="corpora to measure (default: both)",
    )
    p.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="replace the relevance section of FILE (docs/benchmarks.md)",
    )
    p.add_argument(
        "--proximity",
        type=float,
        metavar="W",
        help="experiment: ctindex's proximity weight (matcher.PROXIMITY_WEIGHT)",
    )
    p.add_argument(
        "--saturation",
        choices=("bm25f", "perfield"),
        help="experiment: ctindex's per-field saturation (matcher.SATURATION)",
    )
    args = p.parse_args(argv)
    from ctindex.search import matcher

    if args.proximity is not None:
        matcher.PROXIMITY_WEIGHT = args.proximity
    if args.saturation is not None:
        matcher.SATURATION = args.saturation
    label = f"saturation {matcher.SATURATION}, proximity weight {matcher.PROXIMITY_WEIGHT:g}"
    with tempfile.TemporaryDirectory(prefix="ctindex-relevance-") as tmp:
        section = measure(Path(tmp), args.corpus or ["okf", "npm"], label)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
