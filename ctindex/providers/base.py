"""What a provider is (docs/provider.md): the interface the writer,
the `--direct` oracle and the query parser use, and the document types that
cross it.

The light half of a provider is its ``ProviderInfo`` in the registry
(ctindex/providers/__init__.py): id, versions, eligibility (suffixes,
reserved names) and root detection (the marker file `plan.py` looks for when
no scopes are configured). Those are consulted on every query and by the
policy commands, so they are plain data. This module is the heavy half: how
bytes become a ``Document``, how a document becomes the terms of the index's
fields (ctindex/providers/fields.py), and how a query string becomes terms
of the same fields. ``ctindex.providers.load(id)`` imports it only when a
provider is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from ctindex.base.jsontypes import JSONObject
    from ctindex.providers import ProviderInfo


class ProviderError(NamedTuple):
    """A file the provider claims but cannot read (never indexed; listed by status)."""

    key: str
    message: str


class Document(NamedTuple):
    key: str  # project-relative path
    concept_id: str  # scope-relative path, without the provider's suffix
    scope: str  # scope root key
    title: str
    type: str
    description: str
    tags: tuple[str, ...]
    body: str
    warning: str | None = None  # frontmatter problem (the document is still indexed)
    size: int = 0  # source bytes


class ConceptLink(NamedTuple):
    """A link in a concept's text, in order of appearance."""

    text: str
    target: str  # as written
    # The project-relative path of the concept file the target names (a
    # relative path to a file the provider would read as a concept), else
    # None; whether that file exists or is in the same scope is not judged.
    key: str | None


class ConceptText(NamedTuple):
    """One concept file as `show` and `Index.get` give it: the document the
    index holds, and what only a reader of the file is shown."""

    document: Document
    text: str  # the whole file, decoded
    frontmatter: JSONObject  # the whole metadata mapping
    links: tuple[ConceptLink, ...]
    warning: str | None  # the document's warning, or why the metadata is not shown


class Analysis(NamedTuple):
    """A document as the matcher sees it."""

    tokens: list[str]  # the token stream: field tokens separated by fields.SEP
    tfw: dict[str, int]  # weighted term frequency (incl. facets and ranking terms)
    length: int  # weighted document length
    # Raw token counts of title, tags, description and concept ID (BM25F
    # per-field length normalisation; the body's is length minus the weighted rest).
    flens: tuple[int, int, int, int] = (0, 0, 0, 0)


Lengths = tuple[int, tuple[int, int, int, int]]  # Analysis.length and Analysis.flens


class TermSink(Protocol):
    """What a document's analysis is added to: the segment builder's
    inverter (ctindex/store/native_invert.py)."""

    def add(self, tfw: dict[str, int], tokens: list[str]) -> None: ...


# A document's analysis, still to be added: called once with the sink, it
# adds the analysis's counts and token stream and returns its lengths.
Feed = Callable[[TermSink], Lengths]


def feeds(analyses: Iterable[Analysis]) -> Iterator[Feed]:
    """The feed of each analysis: what `Provider.feed_many` is for a
    provider that has no faster way."""
    return (partial(_add_to, a) for a in analyses)


def _add_to(analysis: Analysis, sink: TermSink) -> Lengths:
    sink.add(analysis.tfw, analysis.tokens)
    return analysis.length, analysis.flens


class AsciiTerms(NamedTuple):
    """An ASCII text's terms as a provider keeps them (``Provider.ascii_terms``)."""

    stems: dict[str, str]  # raw word (letters and digits, case kept) -> term
    fill: Callable[[Iterable[str]], None]  # puts the missing raw words' terms in `stems`


class Provider(Protocol):
    """One compiled-in format. Eligibility is decided before any of this runs
    (ctindex/policy/decide.py, from ``info``); every method here is pure and
    never raises for bad content: a file it cannot read is a ProviderError.

    One index folder has one query analysis, the index provider's
    (``ctindex.providers.INDEX_PROVIDER``): a provider whose scopes share it
    must analyse words the same way, or its documents would hold terms no
    query produces."""

    @property
    def info(self) -> ProviderInfo: ...

    # -- writing: bytes -> document -> terms of the index's fields
    def parse(self, key: str, data: bytes, scope_root: str) -> Document | ProviderError:
        """One file's exact bytes (the ones the reconciler hashed)."""
        ...

    def analyze(self, doc: Document) -> Analysis: ...

    def analyze_many(self, docs: Sequence[Document]) -> Iterator[Analysis]:
        """``analyze`` of each document, in order (may batch the work)."""
        ...

    def feed_many(self, docs: Sequence[Document]) -> Iterator[Feed]:
        """``analyze_many`` as feeds, for the segment builder: the same
        counts and tokens, added without building them as Python objects
        where a native core can (``feeds(self.analyze_many(docs))`` else)."""
        ...

    def concept_id(self, key: str, scope_root: str) -> str:
        """The ID a file of this scope is shown and looked up under."""
        ...

    def concept_key(self, concept_id: str, scope_root: str) -> str:
        """The path of the file a scope's concept ID names: ``concept_id``'s
        inverse (the file may not exist)."""
        ...

    # -- reading one concept for a person or an agent (`show`, `Index.get`)
    def read_concept(self, key: str, data: bytes, scope_root: str) -> ConceptText | ProviderError:
        """One file's exact bytes as a concept to show: ``parse``'s document
        with the whole text, metadata and links."""
        ...

    # -- querying: text -> terms of the same fields
    def fold(self, text: str) -> str:
        """The text as words are read from it (accents and compatibility
        forms folded: ctindex/providers/folding.py), case kept."""
        ...

    def words(self, text: str) -> list[str]:
        """The word tokens of a text's fold (not casefolded or stemmed)."""
        ...

    def terms(self, text: str) -> list[str]:
        """The normalised terms of a text, in order (a phrase's terms)."""
        ...

    def normalize_term(self, word: str) -> str:
        """The term one query word stands for."""
        ...

    def term_spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        """(start, end, term) of every word of a text: what snippets mark."""
        ...

    def ascii_terms(self) -> AsciiTerms | None:
        """When the words of an ASCII text are exactly its maximal runs of
        ASCII letters and digits, each one's term read from a dict: that dict
        and how to fill it, so a snippet's C core (ctindex/search/_snippet.c)
        can read an ASCII text's words and terms itself. None otherwise
        (snippets then use ``term_spans``)."""
        ...

    def facet(self, value: str) -> str:
        """Normal form of a `type:` / `tag:` value."""
        ...
