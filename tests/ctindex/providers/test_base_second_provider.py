"""The Provider interface (ctindex/providers/base.py) is the whole boundary:
a second provider, defined here and registered by id, has its files decided,
indexed, searched and explained with no change to the indexer, the plan or
the search code."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ctindex import providers
from ctindex.indexing import transaction
from ctindex.policy.plan import load_plan
from ctindex.policy.project import Project
from ctindex.providers.base import (
    Analysis,
    ConceptLink,
    ConceptText,
    Document,
    Feed,
    Provider,
    ProviderError,
    feeds,
)
from tests.conftest import CliResult, cli_main

PLAIN = providers.ProviderInfo(
    id="plain-text",
    version=1,
    tokenizer_version=1,
    extensions=(".txt",),
    reserved_names=("LICENSE.txt",),
    default_include=("**/*.txt",),
    index_dir=".ct/okf",
    module="tests.ctindex.providers.test_base_second_provider",  # never imported: passed in
)


class PlainText:
    """A `.txt` file is a document: its first line the title, the rest the
    body. It shares the index with okf-markdown, so it analyses words the
    index provider's way (ctindex/providers/base.py, Provider)."""

    info = PLAIN

    @property
    def _words(self) -> Provider:
        return providers.load(providers.INDEX_PROVIDER)

    def parse(self, key: str, data: bytes, scope_root: str) -> Document | ProviderError:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ProviderError(key, f"{key}: not UTF-8 text")
        title, _, body = text.partition("\n")
        return Document(
            key=key,
            concept_id=self.concept_id(key, scope_root),
            scope=scope_root,
            title=title.strip(),
            type="Text",
            description="",
            tags=(),
            body=body,
            size=len(data),
        )

    def analyze(self, doc: Document) -> Analysis:
        return self._words.analyze(doc)

    def analyze_many(self, docs: Sequence[Document]) -> Iterator[Analysis]:
        return map(self.analyze, docs)

    def feed_many(self, docs: Sequence[Document]) -> Iterator[Feed]:
        return feeds(self.analyze_many(docs))

    def concept_id(self, key: str, scope_root: str) -> str:
        rel = key[len(scope_root) + 1 :] if scope_root else key
        return rel.removesuffix(".txt")

    def concept_key(self, concept_id: str, scope_root: str) -> str:
        return f"{scope_root}/{concept_id}.txt" if scope_root else f"{concept_id}.txt"

    def read_concept(self, key: str, data: bytes, scope_root: str) -> ConceptText | ProviderError:
        doc = self.parse(key, data, scope_root)
        if isinstance(doc, ProviderError):
            return doc
        # A line `see: NAME` links the concept NAME.txt beside this one.
        folder = key.rpartition("/")[0]
        links = tuple(
            ConceptLink(line, line[5:], f"{folder}/{line[5:]}.txt")
            for line in doc.body.splitlines()
            if line.startswith("see: ")
        )
        return ConceptText(doc, data.decode("utf-8"), {}, links, None)

    def fold(self, text: str) -> str:
        return self._words.fold(text)

    def words(self, text: str) -> list[str]:
        return self._words.words(text)

    def terms(self, text: str) -> list[str]:
        return self._words.terms(text)

    def normalize_term(self, word: str) -> str:
        return self._words.normalize_term(word)

    def term_spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        return self._words.term_spans(text)

    def facet(self, value: str) -> str:
        return self._words.facet(value)


@pytest.fixture
def plain_text() -> Iterator[Provider]:
    provider: Provider = PlainText()  # mypy checks it against the Protocol here
    providers.register(PLAIN, provider)
    try:
        yield provider
    finally:
        providers.unregister(PLAIN.id)


@pytest.fixture
def mixed(make_project: Callable[..., Path], plain_text: Provider) -> Path:
    """The ga4 bundle as okf-markdown and a `notes/` folder as plain-text."""
    root = make_project("ga4")
    notes = root / "notes"
    (notes / "deep").mkdir(parents=True)
    (notes / "zebra.txt").write_text("Zebra crossing\nStriped zebras cross the road here.\n")
    (notes / "deep" / "quagga.txt").write_text(
        "Quagga\nAn extinct zebra, also striped.\nsee: okapi\n"
    )
    (notes / "deep" / "okapi.txt").write_text("Okapi\nBanded legs, a forest giraffe.\n")
    (notes / "LICENSE.txt").write_text("License\nzebra terms\n")
    (notes / "readme.md").write_text("# Readme\n\nzebra in markdown\n")
    (notes / "broken.txt").write_bytes(b"\xff\xfe zebra")
    (root / ".ct").mkdir(exist_ok=True)
    scopes = [
        {"root": "notes", "provider": "plain-text", "include": ["**/*.txt", "**/*.md"]},
        {"root": "okf/bundles/ga4", "provider": "okf-markdown", "include": ["**/*.md"]},
    ]
    (root / ".ct" / "index.jsonc").write_text(
        json.dumps({"version": 1, "watch": False, "scopes": scopes})
    )
    return root


def _json(result: CliResult) -> dict[str, object]:
    got = json.loads(result.out)
    assert isinstance(got, dict)
    return got


def test_update_indexes_a_second_providers_files(mixed: Path) -> None:
    project = Project.at(mixed)
    report = transaction.update(project, load_plan(project))
    assert report.published
    # zebra.txt, quagga.txt and broken.txt are plain-text's; LICENSE.txt is
    # reserved, readme.md is not a suffix it claims.
    assert report.errors == 1  # broken.txt: the provider's read error
    again = transaction.update(project, load_plan(project))
    assert not again.published and again.documents == report.documents


def test_search_finds_a_second_providers_documents(mixed: Path) -> None:
    got = _json(cli_main("-C", str(mixed), "--json", "search", "zebra"))
    results = got["results"]
    assert isinstance(results, list)
    by_path = {r["path"]: r for r in results}
    assert set(by_path) == {"notes/zebra.txt", "notes/deep/quagga.txt"}
    assert by_path["notes/zebra.txt"]["id"] == "zebra"
    assert by_path["notes/zebra.txt"]["title"] == "Zebra crossing"
    assert by_path["notes/deep/quagga.txt"]["id"] == "deep/quagga"
    assert "«zebra»" in by_path["notes/deep/quagga.txt"]["snippet"]
    # the oracle (--direct) parses with the same provider and agrees
    direct = _json(cli_main("-C", str(mixed), "--json", "search", "--direct", "zebra"))
    assert direct["results"] == results
    typed = _json(cli_main("-C", str(mixed), "--json", "search", "type:text striped"))
    assert {r["path"] for r in typed["results"]} == set(by_path)


def test_a_second_providers_concept_is_read_through_it(mixed: Path) -> None:
    """`Index.get` / `show` find a concept by ID with the provider's own
    suffix, read it with the provider's `read_concept`, and give its links
    the IDs of the concepts they name: no format is assumed outside the
    provider (ctindex/service/concepts.py)."""
    from ctindex.api import Index

    with Index(mixed) as index:
        concept = index.get("deep/quagga")
        assert (concept.path, concept.title, concept.scope) == (
            "notes/deep/quagga.txt",
            "Quagga",
            "notes",
        )
        assert concept.text.startswith("Quagga\n")
        assert [(link.target, link.concept_id) for link in concept.links] == [
            ("okapi", "deep/okapi")
        ]
        by_path = index.get("notes/deep/okapi.txt")  # the project-relative path
        assert by_path.id == "deep/okapi"
        assert index.get("tables/events_").path.endswith(".md")  # okf-markdown's scope
    shown = cli_main("-C", str(mixed), "show", "zebra")
    assert (shown.code, shown.out) == (0, "Zebra crossing\nStriped zebras cross the road here.\n")


def test_why_names_the_second_provider(mixed: Path) -> None:
    got = _json(
        cli_main(
            "-C",
            str(mixed),
            "--json",
            "why",
            "notes/zebra.txt",
            "notes/LICENSE.txt",
            "notes/readme.md",
        )
    )
    decisions = got["decisions"]
    assert isinstance(decisions, list)
    reasons = {d["path"]: (d["reason"], d["provider"]) for d in decisions}
    assert reasons["notes/zebra.txt"] == ("included", "plain-text")
    assert reasons["notes/LICENSE.txt"][1] == "plain-text"
    assert reasons["notes/LICENSE.txt"][0] != "included"
    # okf-markdown claims `.md`, so the scope's provider is the wrong one
    assert reasons["notes/readme.md"] == ("unsupported-provider", "plain-text")


def test_a_version_change_of_the_second_provider_reindexes_its_scope_only(
    mixed: Path, plain_text: Provider
) -> None:
    project = Project.at(mixed)
    transaction.update(project, load_plan(project))
    providers.register(PLAIN._replace(version=2), plain_text)
    report = transaction.update(project, load_plan(project))
    assert report.rebuilt and "plan changed for scope 'notes'" in (report.reason or "")


def test_load_imports_a_provider_module_only_when_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ctindex.providers as p, ctindex.search.matcher, ctindex.policy.plan\n"
        "assert 'ctindex.providers.okf_markdown' not in sys.modules\n"
        "assert p.load('okf-markdown').info.id == 'okf-markdown'\n"
        "assert 'ctindex.providers.okf_markdown' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
