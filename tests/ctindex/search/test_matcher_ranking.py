"""Ranking rules (docs/search.md, "Ranking"), each on a small corpus where that
rule alone decides the order. Every test checks the index and `--direct`
(same order, same scores) and that the matching set is the independent
oracle's (tests/oracle.py): ranking reorders, it never adds or drops."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctindex.indexing.transaction import update
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.search.execute import Outcome, search_direct, search_index
from ctindex.search.matcher import PREFIX_CAP
from ctindex.search.query import QueryError, parse_query
from tests import oracle
from tests.daemon_support import CliProject


def _project(tmp_path: Path, docs: dict[str, str]) -> Project:
    root = tmp_path / "p"
    kb = root / "kb"
    kb.mkdir(parents=True)
    (root / ".git").mkdir()
    (kb / "index.md").write_text("# kb\n")
    for rel, text in docs.items():
        path = kb / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    project = Project.at(root)
    update(project, load_plan(project))
    return project


def _doc(title: str, body: str, tags: tuple[str, ...] = ()) -> str:
    tag_line = f"tags: [{', '.join(tags)}]\n" if tags else ""
    return f"---\ntitle: {title}\ntype: Concept\n{tag_line}---\n{body}\n"


def _both(project: Project, query: str) -> Outcome:
    """The indexed answer, checked against --direct (same ids, same scores)."""
    node = parse_query(query)
    indexed = search_index(project.index_dir, node, 50, want_keys=True)
    direct = search_direct(str(project.root), load_plan(project), node, 50, want_keys=True)
    assert [(r.path, r.score, r.match) for r in indexed.results] == [
        (r.path, r.score, r.match) for r in direct.results
    ]
    assert indexed.keys == direct.keys
    return indexed


def _ids(out: Outcome) -> list[str]:
    return [r.id for r in out.results]


def test_rule_exact_title_outranks_partial_matches(tmp_path: Path) -> None:
    # The long page says the words far more often; the short one *is* the concept.
    long_body = " ".join(["zqxv7marker ledger entries"] * 40)
    project = _project(
        tmp_path,
        {
            "a/overview.md": _doc("Zqxv7marker Ledger Overview and History", long_body),
            "b/ledger.md": _doc("Zqxv7marker Ledger", "The ledger."),
            "c/other.md": _doc("Unrelated", "zqxv7marker ledger zqxv7marker ledger"),
        },
    )
    out = _both(project, "zqxv7marker ledger")
    assert _ids(out)[0] == "b/ledger"
    assert out.results[0].match == "exact"
    assert {r.path for r in out.results} == set(out.keys)
    assert set(out.keys) == oracle.containing(project.root, "zqxv7marker")


def test_rule_near_exact_title_any_order(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        {
            "x/long.md": _doc(
                "Zqxv7marker Ledger Reconciliation Guide", " ".join(["zqxv7marker ledger"] * 30)
            ),
            "y/short.md": _doc("Ledger Zqxv7marker", "A page."),
        },
    )
    out = _both(project, "zqxv7marker ledger")
    assert _ids(out)[0] == "y/short" and out.results[0].match == "near-exact"


def test_rule_id_query_finds_the_concept_first(tmp_path: Path) -> None:
    # The concept's text never holds the phrase "tables orders"; another page does.
    project = _project(
        tmp_path,
        {
            "tables/orders.md": _doc("Customer Orders zqxv7marker", "One row per order."),
            "guides/joins.md": _doc(
                "Joins", "Join tables orders to tables orders lines. zqxv7marker"
            ),
        },
    )
    out = _both(project, "tables/orders")
    assert _ids(out) == ["tables/orders", "guides/joins"]
    assert out.results[0].match == "exact"
    # The last ID segment alone is an exact match too.
    assert _ids(_both(project, "orders"))[0] == "tables/orders"


def test_rule_field_length_normalisation(tmp_path: Path) -> None:
    # The same single title occurrence of the word, no exact match: the
    # shorter title field wins (its own b), whatever the bodies' lengths.
    project = _project(
        tmp_path,
        {
            "m/long-title.md": _doc(
                "Zqxv7marker and eleven other words in a very long heading", "short body"
            ),
            "m/short-title.md": _doc("Zqxv7marker Summary", " ".join(["filler"] * 200)),
        },
    )
    out = _both(project, "zqxv7marker")
    assert [r.match for r in out.results] == ["", ""]
    assert _ids(out) == ["m/short-title", "m/long-title"]
    assert out.results[0].score > out.results[1].score


def test_rule_prefix_scored_like_terms(tmp_path: Path) -> None:
    # A constant prefix score tied these and broke the tie by path; scored by
    # its expansions, the page about zqxv7docker comes first.
    project = _project(
        tmp_path,
        {
            "a/compose.md": _doc(
                "Compose",
                "mentions zqxv7dockerfile once among many words " + " ".join(["padding"] * 80),
            ),
            "z/docker.md": _doc("Zqxv7docker", "zqxv7docker runs zqxv7docker containers"),
        },
    )
    out = _both(project, "zqxv7dock*")
    assert _ids(out) == ["z/docker", "a/compose"]
    assert out.results[0].score > out.results[1].score > 0
    assert not out.notes


def test_rule_prefix_cap_is_noted_and_matching_unchanged(tmp_path: Path) -> None:
    many = {f"p/{i}.md": _doc(f"Page {i}", f"zqxv7w{i:03d} text") for i in range(PREFIX_CAP + 5)}
    project = _project(tmp_path, many)
    out = _both(project, "zqxv7w*")
    assert out.total == PREFIX_CAP + 5
    assert out.notes and f"{PREFIX_CAP + 5} expansions" in out.notes[0]


def test_type_filter_on_whole_words_any_case(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        {
            "t/a.md": "---\ntitle: A\ntype: BigQuery Table\n---\nzqxv7marker\n",
            "t/b.md": "---\ntitle: B\ntype: Metric\n---\nzqxv7marker\n",
        },
    )
    assert _ids(_both(project, "TYPE:bigquery zqxv7marker")) == ["t/a"]
    assert _ids(_both(project, 'type:"bigquery table"')) == ["t/a"]
    assert _ids(_both(project, "zqxv7marker AND Type:METRIC")) == ["t/b"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("foo*bar", "'*' may only end a word"),
        ("AND margin", "'AND' at column 1 needs a term on both sides"),
        ("margin AND", "needs a term on both sides"),
        ("a AND OR b", "needs a term on both sides"),
    ],
)
def test_query_papercuts_rejected_in_one_line(query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message) as err:
        parse_query(query)
    assert "\n" not in str(err.value)


def _ordered(project: Project, query: str, limit: int) -> Outcome:
    """Like `_both` with a limit: the index and --direct agree on the order,
    the scores and the notes even when the limit cuts between equal keys."""
    node = parse_query(query)
    indexed = search_index(project.index_dir, node, limit, want_keys=True)
    direct = search_direct(str(project.root), load_plan(project), node, limit, want_keys=True)
    assert [(r.path, r.score, r.match) for r in indexed.results] == [
        (r.path, r.score, r.match) for r in direct.results
    ]
    assert indexed.keys == direct.keys and indexed.notes == direct.notes
    return indexed


# Titles whose order differs from the paths' (and from code-point order:
# "banana" is lower case), two equal titles tied by path.
_TITLED = {
    "a/zulu.md": ("banana split", ("fin",)),
    "b/yankee.md": ("Apple", ("fin",)),
    "c/xray.md": ("Cherry", ()),
    "d/whiskey.md": ("apple", ("fin",)),
    "e/victor.md": ("Éclair", ()),
}


def _titled_project(tmp_path: Path) -> Project:
    return _project(
        tmp_path,
        {rel: _doc(title, "zqxv7marker text", tags) for rel, (title, tags) in _TITLED.items()},
    )


def test_filter_only_queries_order_by_title(tmp_path: Path) -> None:
    project = _titled_project(tmp_path)
    by_title = ["b/yankee", "d/whiskey", "a/zulu", "c/xray", "e/victor"]
    for query, want in [
        ("type:Concept", by_title),
        ("path:kb/", by_title),
        ("-zqxv7nothing", by_title),
        ("tag:fin", ["b/yankee", "d/whiskey", "a/zulu"]),
        ("type:Concept -tag:fin", ["c/xray", "e/victor"]),
    ]:
        out = _ordered(project, query, 50)
        assert _ids(out) == want, query
        assert all(r.score == 0 and r.match == "" for r in out.results)
        assert not out.notes
    # The matching set is the oracle's (every document holds the marker).
    assert set(_ordered(project, "path:kb/", 50).keys) == oracle.containing(
        project.root, "zqxv7marker"
    )
    # A query with a word still ranks by score: the title order is for filters only.
    assert _ordered(project, "zqxv7marker type:Concept", 50).total == len(_TITLED)


def test_filter_only_title_order_across_segments(tmp_path: Path) -> None:
    # A document added later lands in a second segment; the order (and the
    # cut of --limit) is over all segments, as --direct sees one partition.
    project = _titled_project(tmp_path)
    (project.root / "kb" / "f").mkdir()
    (project.root / "kb" / "f" / "aaa.md").write_text(_doc("Aardvark", "zqxv7marker"))
    update(project, load_plan(project))
    out = _ordered(project, "type:Concept", 3)
    assert _ids(out) == ["f/aaa", "b/yankee", "d/whiskey"]


def test_filter_only_over_title_cap_orders_by_path_with_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctindex.search import execute as engine

    project = _titled_project(tmp_path)
    (project.root / "kb" / "0").mkdir()
    (project.root / "kb" / "0" / "first.md").write_text(_doc("Zebra", "zqxv7marker"))
    update(project, load_plan(project))  # a second segment, ahead of the first by path
    monkeypatch.setattr(engine, "TITLE_ORDER_CAP", 3)
    out = _ordered(project, "type:Concept", 2)
    assert _ids(out) == ["0/first", "a/zulu"]  # path order across both segments
    assert out.notes and "6 matches" in out.notes[0] and "by path" in out.notes[0]
    # At or under the cap: by title again, no note.
    small = _ordered(project, "tag:fin", 10)
    assert _ids(small) == ["b/yankee", "d/whiskey", "a/zulu"] and not small.notes


def test_equal_scores_cut_by_path_across_segments(tmp_path: Path) -> None:
    # Equal scores are ordered by path over all segments: the index used to
    # fill --limit from its first segment before looking at a later one, so it
    # disagreed with --direct whenever the cut fell between equal scores.
    project = _titled_project(tmp_path)
    (project.root / "kb" / "0").mkdir()
    (project.root / "kb" / "0" / "first.md").write_text(_doc("Zebra", "zqxv7marker text"))
    update(project, load_plan(project))
    out = _ordered(project, "zqxv7marker", 2)
    assert len({r.score for r in out.results}) == 1
    assert _ids(out) == ["0/first", "a/zulu"]


def test_is_filter_only_shapes() -> None:
    from ctindex.search.matcher import is_filter_only

    for q in (
        "type:Metric",
        "tag:a path:kb/",
        "-draft",
        "(type:A tag:b) OR path:x/",
        "-zq -(a OR b) tag:x",
    ):
        assert is_filter_only(parse_query(q)), q
    for q in (
        "margin",
        "type:A margin",
        "marg*",
        '"a b"',
        "tables/orders",
        "tag:x OR word",
        "-a b",
    ):
        assert not is_filter_only(parse_query(q)), q


def _title_order(results: list[dict[str, str]]) -> list[str]:
    return [r["path"] for r in sorted(results, key=lambda r: (r["title"].casefold(), r["path"]))]


@pytest.mark.parametrize("watch", [True, False])
def test_filter_only_title_order_through_the_cli(
    make_cli_project: Callable[..., CliProject], watch: bool
) -> None:
    # The same order whether a clean daemon vouches for the index (fast
    # path), the search reconciles first (watching off) or --direct reads
    # the files; a document created after the index was built is in it.
    cp = make_cli_project(
        bundles=("acme_retail", "ga4"), config=None if watch else {"watch": False}
    )
    cp.cli("update")
    if watch:
        cp.cli("watch", "start")
        cp.wait_daemon()
    new = cp.root / "acme_retail" / "metrics" / "zz-new.md"
    new.write_text("---\ntitle: aardvark zqxv7marker\ntype: Metric\n---\nzqxv7marker\n")
    got = cp.search("type:Metric")
    assert got["freshness"]["mode"] == ("watcher-clean" if watch else "reconcile-on-query")
    paths = [r["path"] for r in got["results"]]
    assert paths == _title_order(got["results"]) and len(paths) > 3
    assert paths[0] == "acme_retail/metrics/zz-new.md"
    assert oracle.containing(cp.root, "zqxv7marker") <= set(paths)
    direct = cp.search("type:Metric", direct=True)
    assert [(r["path"], r["score"]) for r in direct["results"]] == [
        (r["path"], r["score"]) for r in got["results"]
    ]


def test_rule_proximity_words_together_rank_higher(tmp_path: Path) -> None:
    # The same words, counts and lengths: only the distance between the
    # query's words differs. Without proximity they tie and the path decides
    # ("a/far" first); with it the page where they stand together wins.
    filler = " ".join(["padding"] * 30)
    project = _project(
        tmp_path,
        {
            "a/far.md": _doc("Notes", f"zqxv7alpha {filler} zqxv7beta"),
            "b/near.md": _doc("Notes", f"zqxv7alpha zqxv7beta {filler}"),
            "c/one.md": _doc("Notes", f"zqxv7alpha {filler}"),
        },
    )
    out = _ordered(project, "zqxv7alpha zqxv7beta", 10)
    assert _ids(out) == ["b/near", "a/far"]
    assert out.results[0].score > out.results[1].score
    assert set(out.keys) == oracle.containing(project.root, "zqxv7beta")
    # Word order does not matter, a field boundary does: words split between
    # the title and the body have no span.
    assert _ids(_ordered(project, "zqxv7beta zqxv7alpha", 10)) == ["b/near", "a/far"]


def test_min_span_within_one_field() -> None:
    from array import array

    from ctindex.search.matcher import min_span

    sep = 0xFFFF
    seq = array("H", [5, 1, 9, 9, 2, sep, 1, 7, 2, 9, 9, 9, 1, 2])
    assert min_span(seq, [1, 2], sep) == 2  # "1 2" at the end of the body
    assert min_span(seq, [2, 1], sep) == 2
    assert min_span(array("H", [1, 9, sep, 2]), [1, 2], sep) is None  # split by a field
    assert min_span(seq, [1, 3], sep) is None
    # Bytes of a rank straddling two items (0x0200, 0x0001 holds 02 01 at an
    # odd offset, the bytes of 0x0102) are no occurrence.
    assert min_span(array("H", [0x0200, 0x0001]), [0x0102, 0x0001], sep) is None
    assert min_span(array("H", [0x0200, 0x0102, 0x0001]), [0x0102, 0x0001], sep) == 2


def test_proximity_never_changes_matching(
    monkeypatch: pytest.MonkeyPatch, bundles_project: Path
) -> None:
    from ctindex.search import matcher

    project = Project.at(bundles_project)
    update(project, load_plan(project))
    queries = [
        "gross margin",
        "revenue orders",
        "bigquery table events",
        "user session",
        '"gross margin" revenue',
        "orders customer -revenue",
        "page views OR sessions",
        "when a customer order is recognized",
    ]
    with_prox = {q: _ordered(project, q, 1000) for q in queries}
    monkeypatch.setattr(matcher, "PROXIMITY_WEIGHT", 0.0)
    reordered = 0
    for q in queries:
        without = _ordered(project, q, 1000)
        assert with_prox[q].keys == without.keys and with_prox[q].total == without.total, q
        reordered += _ids(with_prox[q]) != _ids(without)
    assert reordered >= 2  # proximity did decide something here


def test_proximity_pool_is_the_same_over_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the first PROXIMITY_POOL matches get the bonus; which ones is
    # decided over all segments with the path breaking ties, as in --direct.
    from ctindex.search import matcher

    body = "zqxv7alpha zqxv7beta"
    project = _project(tmp_path, {"m/b.md": _doc("Notes", body), "m/c.md": _doc("Notes", body)})
    (project.root / "kb" / "m" / "a.md").write_text(_doc("Notes", body))
    update(project, load_plan(project))  # m/a.md in a second segment
    monkeypatch.setattr(matcher, "PROXIMITY_POOL", 1)
    out = _ordered(project, "zqxv7alpha zqxv7beta", 10)
    assert _ids(out) == ["m/a", "m/b", "m/c"]
    assert out.results[0].score > out.results[1].score == out.results[2].score


def test_rule_title_hit_beats_adjacent_body_words(tmp_path: Path) -> None:
    # `summary of`: the page titled "Summary of Expressions" against pages
    # whose body puts the two words side by side again and again (links to
    # it). Each field saturates on its own, so the body's repetitions can
    # not outweigh the title; proximity does not hand the body pages the win.
    links = " ".join(["see the zqxv7summary of the chapter."] * 12)
    project = _project(
        tmp_path,
        {
            "a/links-one.md": _doc("Statements", f"{links} More text about statements."),
            "b/links-two.md": _doc("Declarations", f"{links} And declarations."),
            "c/summary.md": _doc(
                "Zqxv7summary of Expressions", "Operators, operands and their order."
            ),
        },
    )
    out = _both(project, "zqxv7summary of")
    assert _ids(out)[0] == "c/summary"
    assert out.results[0].match == ""  # no tier decided: the score did
    assert set(out.keys) == oracle.containing(project.root, "zqxv7summary")


def test_rule_title_words_beat_the_same_stems_in_a_body(tmp_path: Path) -> None:
    # `register specifier`: the page titled "Zqxv7register Specifier Syntax"
    # against a longer page whose body says "specified by zqxv7register"
    # (the same stems, side by side) several times.
    said = " ".join(["The operand is specified by zqxv7register here."] * 6)
    project = _project(
        tmp_path,
        {
            "a/operands.md": _doc("Operand Specifiers", f"{said} Operands come in kinds."),
            "b/specifier.md": _doc(
                "The Zqxv7register Specifier and Its Syntax in Assembly Listings",
                "How to write one: a letter and a number, as the manual lists them.",
            ),
        },
    )
    out = _both(project, "zqxv7register specifier")
    assert _ids(out) == ["b/specifier", "a/operands"]
    assert out.results[0].score > out.results[1].score
    assert set(out.keys) == oracle.containing(project.root, "zqxv7register")


def test_per_field_saturation_title_worth_independent_of_body(tmp_path: Path) -> None:
    # Per-field saturation: a title hit adds the same to a page's score
    # whether or not its body also holds the word many times, so the page
    # with the word in the title and the body beats the body-only page by
    # about what the title alone is worth.
    body = " ".join(["zqxv7gamma stands here."] * 30)
    project = _project(
        tmp_path,
        {
            "a/body.md": _doc("Notes", body),
            "b/both.md": _doc("Zqxv7gamma Notes", body),
            "c/title.md": _doc("Zqxv7gamma Notes Two", "Nothing else."),
        },
    )
    out = _both(project, "zqxv7gamma")
    scores = {r.id: r.score for r in out.results}
    title_only = scores["c/title"]
    assert scores["b/both"] - scores["a/body"] > 0.5 * title_only


def test_phrase_span_known_without_reading_is_the_span_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A phrase query's proximity bonus is taken from the phrase itself for
    # streams searched whole (matcher._phrase_span); it must be the float
    # reading every stream gives, bit for bit: short pages, a page past
    # PROXIMITY_LONG whose phrase sits beyond the anchors min_span looks at,
    # a page whose phrase is in its title, and a phrase ("a b b c") whose own
    # shortest run is longer than its distinct words.
    from ctindex.search import matcher
    from ctindex.search.index_partition import SegmentPartition
    from ctindex.store.snapshot import Snapshot, with_snapshot

    filler = " ".join(f"zqf{i % 50}" for i in range(matcher.PROXIMITY_LONG))
    anchors = " ".join(["zqa"] * (matcher.PROXIMITY_ANCHORS + 5))
    docs = {
        "s/one.md": _doc("One", "zqa zqb zqc and more zqa zqb zqb zqc"),
        "s/two.md": _doc("Zqa zqb", "words zqc zqb zqa zqb zqb zqc"),
        "s/three.md": _doc("Three", "zqa zqb zqb zqc zqa zqb zqc"),
        "l/long.md": _doc("Long", f"{anchors} {filler} zqa zqb zqc zqa zqb zqb zqc"),
    }
    project = _project(tmp_path, docs)
    queries = ['"zqa zqb"', '"zqa zqb zqc"', '"zqa zqb zqb zqc"', '"zqb zqa"', '"zqa zqb zqa"']

    def rankings() -> list[list[dict[int, float]]]:
        def run(snap: Snapshot) -> list[list[dict[int, float]]]:
            parts = [SegmentPartition(v) for v in snap.views]
            return [matcher.search(parse_query(q), parts).scores for q in queries]

        return with_snapshot(project.index_dir, run)

    known = rankings()
    asked: list[int | None] = []

    def declined(node: matcher.Node, part: matcher.Partition, want: list[int]) -> None:
        asked.append(real(node, part, want))

    real = matcher._phrase_span
    monkeypatch.setattr(matcher, "_phrase_span", declined)
    read = rankings()  # every stream of the pool read and measured
    assert 2 in asked and 3 in asked and None in asked  # each case was met
    assert [[{d: v.hex() for d, v in sc.items()} for sc in r] for r in known] == [
        [{d: v.hex() for d, v in sc.items()} for sc in r] for r in read
    ]
    assert any(len(sc) >= 3 for r in known for sc in r)  # the phrases do match
    for q in queries:  # and the index still agrees with --direct
        _ordered(project, q, 10)
