"""Query fields and accent folding end to end (docs/search.md, "Fields" and
"Accent and compatibility folding"): real `python -m ctindex` processes for
the errors and the field answers (indexed, --direct, tests/oracle.py), the
in-process index and --direct for the folding property, and an index built
by the unfolding tokenizer rebuilt on the next query."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctindex import providers
from ctindex.base import native_modules
from ctindex.indexing.transaction import update
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.providers import okf_markdown as okf
from ctindex.providers.folding import fold
from ctindex.search.execute import Outcome, search_direct, search_index
from ctindex.search.query import parse_query
from tests import oracle
from tests.daemon_support import CliProject

MARK = "zqxv7field"
TAG = "zqxv7tag"
DOCS = {
    "a.md": f"---\ntitle: {MARK} Café Report\ndescription: about naïve gross margin\n"
    f"tags: [{TAG}, Crème Brûlée]\ntype: Metric\n---\n{MARK} body mentions résumé\n",
    "b.md": f"---\ntitle: Other Page\ndescription: {MARK} in the description\n"
    f"tags: [ops]\n---\n{MARK} in the body, gross margin\n",
    "c.md": f"---\ntitle: Gross Margin {MARK}\ndescription: margin gross\n"
    f"tags: [{TAG}]\n---\nthe body only\n",
    "d.md": f"---\ntitle: Body Only\n---\n{MARK} gross margin in the body\n",
}
FIELD_QUERIES = [
    f"title:{MARK}",
    f"description:{MARK}",
    f'title:"gross margin" {MARK}',
    f"description:gross {MARK}",
    f'description:"gross margin" {MARK}',
    f"tags:{TAG}",
    f"TAG:{TAG} -title:report",
    'tags:"creme brulee"',
    "id:notes/a",
    f"title:{MARK} OR description:{MARK}",
    f"{MARK} -description:{MARK}",
    "title:cafe",
    "type:metric title:report",
]


@pytest.fixture
def project(make_cli_project: Callable[..., CliProject]) -> CliProject:
    cp = make_cli_project(bundles=("ga4",), config={"watch": False})
    notes = cp.root / "ga4" / "notes"
    notes.mkdir()
    for name, text in DOCS.items():
        (notes / name).write_text(text, encoding="utf-8")
    return cp


def _ranked(doc: dict[str, Any]) -> list[tuple[str, float, str]]:
    return [(r["path"], r["score"], r["match"]) for r in doc["results"]]


@pytest.mark.slow
def test_fields_answer_alike_indexed_direct_and_oracle(project: CliProject) -> None:
    root = project.root
    for query in FIELD_QUERIES:
        indexed = project.search(query)
        assert indexed["freshness"]["mode"] != "direct", query
        assert _ranked(indexed) == _ranked(project.search(query, direct=True)), query
    notes = {f"ga4/notes/{n}" for n in DOCS}
    hits = {q: set(project.hits(project.search(q))) for q in FIELD_QUERIES}
    # tests/oracle.py reads the frontmatter lines on its own.
    assert (
        hits[f"title:{MARK}"]
        == oracle.with_field_word(root, "title", MARK)
        == {
            "ga4/notes/a.md",
            "ga4/notes/c.md",
        }
    )
    assert hits[f"description:{MARK}"] == oracle.with_field_word(root, "description", MARK)
    assert hits[f"tags:{TAG}"] == oracle.with_field_word(root, "tags", TAG) & notes
    assert hits[f"title:{MARK} OR description:{MARK}"] == (
        oracle.with_field_word(root, "title", MARK)
        | oracle.with_field_word(root, "description", MARK)
    )
    assert hits[f"{MARK} -description:{MARK}"] == (
        oracle.containing(root, MARK) - oracle.with_field_word(root, "description", MARK)
    )
    # Consecutively, inside the field: c's title, not a's description (the
    # words are there, in the other order) nor b's or d's body.
    assert hits[f'title:"gross margin" {MARK}'] == {"ga4/notes/c.md"}
    assert hits[f'description:"gross margin" {MARK}'] == {"ga4/notes/a.md"}
    assert hits[f"description:gross {MARK}"] == {"ga4/notes/a.md", "ga4/notes/c.md"}
    assert hits[f"TAG:{TAG} -title:report"] == {"ga4/notes/c.md"}
    assert hits['tags:"creme brulee"'] == {"ga4/notes/a.md"}
    assert hits["id:notes/a"] == {"ga4/notes/a.md"}
    assert hits["title:cafe"] == hits["type:metric title:report"] == {"ga4/notes/a.md"}
    # A title query that is the whole title still ranks it first, as exact.
    top = project.search(f'title:"gross margin {MARK}"')["results"][0]
    assert (top["path"], top["match"]) == ("ga4/notes/c.md", "exact")


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("extra", [(), ("--direct",), ("--json",), ("--direct", "--paths")])
def test_an_unknown_field_is_exit_2_and_one_line(
    project: CliProject, extra: tuple[str, ...]
) -> None:
    done = _cli(project.root, "search", *extra, f"tgs:{TAG}")
    assert done.returncode == 2
    if "--json" in extra:  # the error as JSON too (ctindex/schemas/error.json)
        error = json.loads(done.stdout)["error"]
        assert error["kind"] == "UnknownField" and error["suggestions"][0] == "tags"
        assert error["message"] == done.stderr.strip().removeprefix("ctindex: ")
    else:
        assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("ctindex: query: unknown field 'tgs' at column 1; ")
    assert "did you mean 'tags'? fields: description, id, path, tag, tags, title, type" in (
        done.stderr
    )
    # Quoted, the same word is text: no such text, no hit, no error.
    assert _cli(project.root, "search", *extra, f'"tgs:{TAG}"').returncode == 1


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("12:30", {"ga4/notes/t.md"}),
        ("http://example.org/zqxv7url", {"ga4/notes/t.md"}),
        ("std::zqxv7vec", {"ga4/notes/t.md"}),
        ('"note:zqxv7draft"', {"ga4/notes/t.md"}),
    ],
)
def test_words_with_a_colon_that_are_text(project: CliProject, query: str, found: set[str]) -> None:
    (project.root / "ga4" / "notes" / "t.md").write_text(
        "# Times\nmeet at 12:30, see http://example.org/zqxv7url, std::zqxv7vec, note:zqxv7draft\n"
    )
    indexed = project.search(query)
    assert set(project.hits(indexed)) >= found
    assert _ranked(indexed) == _ranked(project.search(query, direct=True))


def test_accents_fold_both_ways(project: CliProject) -> None:
    for query, path in [
        ("cafe", "ga4/notes/a.md"),
        ("naive", "ga4/notes/a.md"),
        ("resume", "ga4/notes/a.md"),
        ("Café", "ga4/notes/a.md"),
        ("RÉSUMÉ", "ga4/notes/a.md"),
    ]:
        for direct in (False, True):
            doc = project.search(query, direct=direct)
            assert path in project.hits(doc), (query, direct)
    snippet = project.search("resume")["results"][0]["snippet"]
    assert "«résumé»" in snippet  # the word as written is marked


# -- the folding property, in process --------------------------------------

_LETTERS = "abcxyzAÉ"
_FOLDING = "éÉèñÅçüİßﬁﬂ²³ⅫⅣ①ÿ\u0301\u0308ǅẞ"
_word = st.text(alphabet=_LETTERS + _FOLDING, min_size=1, max_size=8).filter(
    lambda w: bool(okf.terms(w)) and w[0] not in "\u0301\u0308"
)


def _found(outcome: Outcome) -> set[str]:
    return set(outcome.keys)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(word=_word)
def test_folded_query_finds_the_text_and_back(
    tmp_path_factory: pytest.TempPathFactory, word: str
) -> None:
    """For a word with accents or compatibility forms: searching its fold
    finds the text holding the word, and searching the word finds the text
    holding its fold, indexed and --direct alike."""
    root = tmp_path_factory.mktemp("fold")
    (root / ".git").mkdir()
    kb = root / "kb"
    kb.mkdir()
    (kb / "index.md").write_text("# kb\n")
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    (kb / "raw.md").write_text(f"# Raw\nbefore {word} after\n", encoding="utf-8")
    (kb / "folded.md").write_text(f"# Folded\nbefore {fold(word)} after\n", encoding="utf-8")
    (kb / "other.md").write_text("# Other\nnothing here\n")
    project = Project.at(root)
    plan = load_plan(project)
    update(project, plan)
    both = {"kb/raw.md", "kb/folded.md"}
    for query in (f'"{fold(word)}"', f'"{word}"', f'"{fold(word).upper()}"'):
        node = parse_query(query)
        indexed = search_index(project.index_dir, node, 10, want_keys=True)
        direct = search_direct(str(root), plan, node, 10, want_keys=True)
        assert _found(indexed) == _found(direct) == both, (word, query)
        assert [(r.path, r.score) for r in indexed.results] == [
            (r.path, r.score) for r in direct.results
        ]


def test_an_index_of_the_unfolding_tokenizer_is_rebuilt(
    project: CliProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built by tokenizer v2 (no folding: `cafe` is not in it), the index is
    rebuilt by the first query of v3, which then finds Café."""
    import ctindex

    older = providers.OKF_MARKDOWN._replace(tokenizer_version=2)
    with monkeypatch.context() as old:
        old.setitem(providers.PROVIDERS, older.id, older)
        old.setenv("CTINDEX_PURE", "1")  # the native core folds through folding.fold
        old.setattr(okf, "fold", lambda text: text)
        native_modules.reset()
        okf._CACHE.clear()
        project_ = Project.at(project.root)
        update(project_, load_plan(project_))
        stale = search_index(project_.index_dir, parse_query("cafe"), 10, want_keys=True)
        assert "ga4/notes/a.md" not in stale.keys  # the v2 index has "café" only
    native_modules.reset()
    okf._CACHE.clear()
    with ctindex.Index(project.root) as index:
        got = index.search("cafe")
    assert "tokenizer v2 -> v1 tokenizer v3" in (got.freshness.rebuilt or "")
    assert "ga4/notes/a.md" in {h.path for h in got.hits}


# -- fields: indexed, --direct and a reference, on generated documents --------

_VOCAB = ["zqa", "zqb", "zqc", "zqé", "zqe", "ZQA"]
_phrase = st.lists(st.sampled_from(_VOCAB), min_size=0, max_size=4).map(" ".join)


def _words_of(text: str) -> list[str]:
    """The reference's words: whitespace-split, folded by hand (é is the one
    accent of the vocabulary) and lower-cased."""
    return [w.replace("é", "e").lower() for w in text.split()]


def _holds(field: str, query: str) -> bool:
    have, want = _words_of(field), _words_of(query)
    return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    docs=st.lists(st.tuples(_phrase, _phrase, _phrase), min_size=1, max_size=6),
    field=st.sampled_from(["title", "description"]),
    query=st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=2).map(" ".join),
)
def test_field_matches_are_the_reference_indexed_and_direct(
    tmp_path_factory: pytest.TempPathFactory,
    docs: list[tuple[str, str, str]],
    field: str,
    query: str,
) -> None:
    """`title:"…"` / `description:"…"`: the words consecutively in that
    field, never in another one (body, the other field), case and accents
    aside; the index and --direct give the same documents and scores."""
    root = tmp_path_factory.mktemp("fields")
    (root / ".git").mkdir()
    kb = root / "kb"
    kb.mkdir()
    (kb / "index.md").write_text("# kb\n")
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": false}')
    want: set[str] = set()
    for i, (title, description, body) in enumerate(docs):
        # A title without a word would fall back to the file name: keep one.
        title = title or "untitled"
        text = f"---\ntitle: {title}\ndescription: {description}\n---\n{body}\n"
        (kb / f"d{i}.md").write_text(text, encoding="utf-8")
        if _holds(title if field == "title" else description, query):
            want.add(f"kb/d{i}.md")
    project = Project.at(root)
    plan = load_plan(project)
    update(project, plan)
    node = parse_query(f'{field}:"{query}"')
    indexed = search_index(project.index_dir, node, 100, want_keys=True)
    direct = search_direct(str(root), plan, node, 100, want_keys=True)
    assert _found(indexed) == _found(direct) == want
    assert [(r.path, r.score, r.match) for r in indexed.results] == [
        (r.path, r.score, r.match) for r in direct.results
    ]
