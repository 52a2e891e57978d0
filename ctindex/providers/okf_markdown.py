"""The `okf-markdown` provider, v1 (docs/provider.md): parse and tokenize.

``parse(key, data)`` turns the exact bytes of one file into a ``Document`` or
a ``ProviderError``; ``analyze(doc)`` turns a document into the token stream
the index and the ``--direct`` oracle both match against, so the two can not
disagree on what a word is.

Text is first folded (ctindex/providers/folding.py: NFKD, combining marks
removed, so ``Café`` reads ``Cafe``); tokens are then maximal runs of Unicode
letters/digits (``[^\\W_]+``: the underscore splits, so ``gross_margin`` is
two words, as in prose), casefolded, then stemmed with the Snowball English
stemmer (PyStemmer). Each distinct raw
word is stemmed once per process (a dict cache), which is where most of the
tokenizing time would otherwise go.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol, cast

from ctindex.providers import OKF_MARKDOWN, ProviderInfo, frontmatter
from ctindex.providers.base import (
    Analysis,
    AsciiTerms,
    ConceptLink,
    ConceptText,
    Document,
    Feed,
    Lengths,
    Provider,
    ProviderError,
    TermSink,
    feeds,
)

# The term layout is the index's, shared by every provider; re-exported here,
# beside the analysis that fills it.
from ctindex.providers.fields import (
    EXACT_ID,
    EXACT_LAST,
    EXACT_TITLE,
    EXACT_TITLE_SET,
    FACET_TAG,
    FACET_TYPE,
    FACET_TYPE_WORD,
    FIELD_TERM,
    FIELDS,
    SEP,
    WEIGHTS,
)
from ctindex.providers.folding import FoldedText, fold
from ctindex.providers.frontmatter import NOT_SCALAR, Fields, NotScalar, Scalar

__all__ = [
    "EXACT_ID",
    "EXACT_LAST",
    "EXACT_TITLE",
    "EXACT_TITLE_SET",
    "FACET_TAG",
    "FACET_TYPE",
    "FACET_TYPE_WORD",
    "FIELDS",
    "FIELD_TERM",
    "PROVIDER",
    "SEP",
    "WEIGHTS",
    "Analysis",
    "Document",
    "ProviderError",
]

PROVIDER_ID = OKF_MARKDOWN.id
PROVIDER_VERSION: int = OKF_MARKDOWN.version
TOKENIZER_VERSION: int = OKF_MARKDOWN.tokenizer_version

WORD_RE = re.compile(r"[^\W_]+")
# The same tokens on pure-ASCII text (the ASCII letters and digits are exactly
# the ASCII characters `[^\W_]` matches), ~2.4x faster: no Unicode category
# lookup per character. `_words_re` picks it after one C-level isascii().
_ASCII_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_HEADING_RE = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_BOM = b"\xef\xbb\xbf"


# -- parsing -------------------------------------------------------------------


def concept_id(key: str, scope_root: str) -> str:
    rel = key[len(scope_root) + 1 :] if scope_root and key.startswith(scope_root + "/") else key
    return rel[:-3] if rel.endswith(".md") else rel


def concept_key(cid: str, scope_root: str) -> str:
    return f"{scope_root}/{cid}.md" if scope_root else f"{cid}.md"


def parse(key: str, data: bytes, scope_root: str = "") -> Document | ProviderError:
    """Parse one file's exact bytes. Never raises for bad content."""
    native = _native()
    if native is not None:  # the common shape, in one C call (_words.c parse)
        got = native.parse(key, data, scope_root, Document, NOT_SCALAR)
        if got is not None:
            return got
    return _parse(key, data, scope_root)


def _parse(key: str, data: bytes, scope_root: str) -> Document | ProviderError:
    """`parse`, the pure way: the specification of ctindex/providers/_words.c
    `parse`, which returns None for whatever it leaves to this."""
    if b"\x00" in data:
        return ProviderError(key, f"{key}: contains a NUL byte (not a text document)")
    raw = data[3:] if data.startswith(_BOM) else data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = exc.start + len(data) - len(raw)
        return ProviderError(key, f"{key}: invalid UTF-8 at byte {where}")
    meta, body, warning = frontmatter.split(text)
    if warning:
        warning = f"{key}: {warning}"
    problems: list[str] = []
    title = _scalar(meta, "title", problems) or _first_heading(body) or _stem(key)
    doc_type = _scalar(meta, "type", problems)
    description = _scalar(meta, "description", problems)
    tags = _tags(meta, problems)
    if problems and not warning:
        warning = f"{key}: frontmatter " + "; ".join(problems)
    return Document(
        key=key,
        concept_id=concept_id(key, scope_root),
        scope=scope_root,
        title=title,
        type=doc_type,
        description=description,
        tags=tags,
        body=body,
        warning=warning,
        size=len(data),
    )


def read_concept(key: str, data: bytes, scope_root: str = "") -> ConceptText | ProviderError:
    """`parse`, with the whole text, the whole frontmatter mapping and the
    inline links (`show`, `Index.get`)."""
    doc = parse(key, data, scope_root)
    if isinstance(doc, ProviderError):
        return doc
    text = data.decode("utf-8-sig")
    meta, problem = frontmatter.whole_mapping(text)
    warning = doc.warning or (f"{key}: {problem}" if problem else None)
    return ConceptText(doc, text, meta, tuple(_links(key, doc.body)), warning)


MAX_LINK_TEXT = 500
MAX_LINK_TARGET = 2000
# Inline Markdown links. Both parts are bounded, so a text full of '[' costs
# linear time, not a scan to the end from every bracket.
_LINK_RE = re.compile(
    rf"\[([^\]\n]{{0,{MAX_LINK_TEXT}}})\]\(<?([^)\s<>]{{1,{MAX_LINK_TARGET}}})>?"
    r"(?:\s+\"[^\"\n]*\")?\)"
)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _links(key: str, body: str) -> Iterator[ConceptLink]:
    """Inline links in order; a relative `.md` target that is not a reserved
    name (index.md, log.md) names the concept file at that path."""
    folder = posixpath.dirname(key)
    for m in _LINK_RE.finditer(body):
        text, target = m.group(1), m.group(2)
        path = target.split("#", 1)[0].split("?", 1)[0]
        linked = None
        if (
            OKF_MARKDOWN.claims_extension(path)
            and not _SCHEME_RE.match(path)
            and not path.startswith("/")
        ):
            linked = posixpath.normpath(posixpath.join(folder, path))
            if OKF_MARKDOWN.refuses_name(posixpath.basename(linked)):
                linked = None
        yield ConceptLink(text, target, linked)


def _scalar(meta: Fields, name: str, problems: list[str]) -> str:
    value = meta.get(name)
    if value is None:
        return ""
    if isinstance(value, (NotScalar, list)):
        problems.append(f"field '{name}' is not a scalar (ignored)")
        return ""
    return " ".join(str(value).split())


def _tags(meta: Fields, problems: list[str]) -> tuple[str, ...]:
    value = meta.get("tags")
    if value is None:
        return ()
    if isinstance(value, str):
        items: Iterable[Scalar] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        problems.append("field 'tags' is neither a list nor a comma-separated string (ignored)")
        return ()
    out: list[str] = []
    for item in items:
        if isinstance(item, NotScalar) or item is None:
            continue
        text = " ".join(str(item).split())
        if text and text not in out:
            out.append(text)
    return tuple(out)


def _first_heading(body: str) -> str:
    in_fence = False
    for line in body.splitlines():
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            m = _HEADING_RE.match(line)
            if m:
                return m.group(1)
    return ""


def _stem(key: str) -> str:
    name = key.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


# -- tokenizing ------------------------------------------------------------------

_CACHE: dict[str, str] = {}
_CACHE_LIMIT = 1_000_000
_stemmer: Any = None


def _stem_words(words: Iterable[str]) -> None:
    """Fill the cache for raw words not yet in it (one batched stemmer call)."""
    global _stemmer
    cache = _CACHE
    wanted = words if isinstance(words, set) else set(words)
    missing = list(wanted.difference(cache))
    if not missing:
        return
    if _stemmer is None:
        import Stemmer  # lazy: PyStemmer is only needed when text is analysed

        _stemmer = Stemmer.Stemmer("english")
        _stemmer.maxCacheSize = 0  # our cache is in front of it
    if len(cache) + len(missing) > _CACHE_LIMIT:
        cache.clear()
        missing = list(wanted)  # the caller looks all of them up next
    cache.update(zip(missing, _stemmer.stemWords([w.casefold() for w in missing]), strict=True))


def _words_re(text: str) -> re.Pattern[str]:
    return _ASCII_WORD_RE if text.isascii() else WORD_RE


def words(text: str) -> list[str]:
    """The word tokens of a text's fold (not casefolded or stemmed)."""
    text = fold(text)
    return _words_re(text).findall(text)


def terms(text: str) -> list[str]:
    """Folded, casefolded, stemmed terms of a text, in order."""
    text = fold(text)
    raw = _words_re(text).findall(text)
    try:  # the common case: every word seen before
        return list(map(_CACHE.__getitem__, raw))
    except KeyError:
        _stem_words(raw)
        return list(map(_CACHE.__getitem__, raw))


def term_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, term) of every word in `text` (snippets mark these
    spans): the words are the fold's, the spans the original text's."""
    if not text.isascii():
        return _folded_spans(text)
    # ASCII: each step a C-level pass (the snippet of every shown result
    # runs this), and the stemmer only when a word is not cached yet.
    matches = list(_ASCII_WORD_RE.finditer(text))
    raw = list(map(re.Match.group, matches))
    try:
        stems = list(map(_CACHE.__getitem__, raw))
    except KeyError:
        _stem_words(raw)
        stems = list(map(_CACHE.__getitem__, raw))
    return zip(map(re.Match.start, matches), map(re.Match.end, matches), stems, strict=True)


def ascii_terms() -> AsciiTerms:
    """The cache behind `term_spans`'s ASCII path: its words are the runs of
    `_ASCII_WORD_RE`, their terms `_CACHE`'s values (filled by `_stem_words`)."""
    return AsciiTerms(_CACHE, _stem_words)


def _folded_spans(text: str) -> Iterator[tuple[int, int, str]]:
    folded = FoldedText(text)
    matches = list(WORD_RE.finditer(folded.text))
    _stem_words(m.group() for m in matches)
    cache = _CACHE
    spans = folded.origins(m.span() for m in matches)
    for (start, end), m in zip(spans, matches, strict=True):
        yield start, end, cache[m.group()]


def normalize_term(word: str) -> str:
    """The term a single query word stands for."""
    found = terms(word)
    return found[0] if len(found) == 1 else word.casefold()


def facet(value: str) -> str:
    """Normal form of a type/tag value: folded, inner whitespace collapsed,
    casefolded."""
    return " ".join(fold(value).split()).casefold()


# What the assembly of an analysis needs besides the terms, in the order
# ctindex/providers/_words.c `assemble` reads it: the field weights of the
# title, tags and description; the field-term heads of those and of the
# concept ID; the field separator; the facet heads; the exact-match heads.
_Layout = tuple[
    tuple[int, int, int],
    tuple[str, str, str, str],
    str,
    tuple[str, str, str],
    tuple[str, str, str, str],
]
_LAYOUT: _Layout = (
    (WEIGHTS[0], WEIGHTS[1], WEIGHTS[2]),
    (FIELD_TERM[0], FIELD_TERM[1], FIELD_TERM[2], FIELD_TERM[3]),
    SEP,
    (FACET_TYPE, FACET_TYPE_WORD, FACET_TAG),
    (EXACT_TITLE, EXACT_ID, EXACT_LAST, EXACT_TITLE_SET),
)
_Assembled = tuple[list[str], dict[str, int], int, tuple[int, int, int, int]]


class _WordsModule(Protocol):
    """ctindex/providers/_words.c, the C twins of this module's pure code:
    `terms` of the regex split and stem-cache map in `_fields_terms` (and
    `fields_terms` of it for every field of a batch, in one call),
    `assemble` of `_assemble`, `assemble_into` of `_assemble_into`,
    `parse` of `_parse` (the common shape only); its `frontmatter` is
    ctindex/providers/frontmatter.py's."""

    def terms(self, text: str, cache: dict[str, str]) -> tuple[list[str], list[int] | None]: ...
    def fields_terms(
        self,
        docs: list[tuple[str, ...]],
        cache: dict[str, str],
        stem: Callable[[set[str]], None] | None = None,
    ) -> tuple[list[list[list[str]]], list[tuple[list[str], list[int]]]]: ...
    def assemble(
        self, fields: list[list[str]], doc_type: str, tags: tuple[str, ...], layout: _Layout
    ) -> _Assembled: ...
    def assemble_into(
        self,
        fields: list[list[str]],
        doc_type: str,
        tags: tuple[str, ...],
        layout: _Layout,
        sink: TermSink,
    ) -> Lengths: ...
    def parse(
        self,
        key: str,
        data: bytes,
        scope_root: str,
        document: type[Document],
        not_scalar: NotScalar,
    ) -> Document | None: ...


def _native() -> _WordsModule | None:
    from ctindex.base import native_modules

    return cast("_WordsModule | None", native_modules.load("ctindex.providers._words"))


def _field_texts(doc: Document) -> tuple[str, ...]:
    """What `_assemble` reads the terms of: the body, the title, each tag, the
    description, the concept ID and its last segment."""
    cid = doc.concept_id
    return (doc.body, doc.title, *doc.tags, doc.description, cid, cid.rpartition("/")[2])


def _fields_terms(docs: Sequence[Document]) -> list[list[list[str]]]:
    """The terms of each field of each document (`_field_texts` order); the
    words of the batch not yet in the cache are stemmed in one call."""
    native = _native()
    cache = _CACHE
    if native is None:
        raws = [[words(text) for text in _field_texts(doc)] for doc in docs]
        wanted: set[str] = set()
        for fields in raws:
            for raw in fields:
                wanted.update(raw)
        _stem_words(wanted)  # all of them: a full cache is emptied first
        del wanted
        get = cache.__getitem__
        return [[list(map(get, raw)) for raw in fields] for fields in raws]
    # The words the cache lacks go to _stem_words as one set, then in place.
    out, _unknown = native.fields_terms([_field_texts(doc) for doc in docs], cache, _stem_words)
    return out


def analyze(doc: Document) -> Analysis:
    """The token stream and weighted statistics of a document."""
    return _analysis(doc, _fields_terms([doc])[0], _native())


ANALYZE_BATCH = 512  # documents whose new words are stemmed together


def analyze_many(docs: Sequence[Document]) -> Iterator[Analysis]:
    """`analyze` of each document, in order. The new words of a batch are
    stemmed in one call: with a long-tailed vocabulary most documents bring
    a word not seen before, and a stemmer call per document costs ~25 % of
    analysing a corpus."""
    native = _native()
    for doc, fields in _batched_terms(docs):
        yield _analysis(doc, fields, native)


def _batched_terms(docs: Sequence[Document]) -> Iterator[tuple[Document, list[list[str]]]]:
    """Each document with its fields' terms, found ANALYZE_BATCH documents
    at a time (`_fields_terms`: the batch's new words in one stemmer call)."""
    for i in range(0, len(docs), ANALYZE_BATCH):
        batch = docs[i : i + ANALYZE_BATCH]
        yield from zip(batch, _fields_terms(batch), strict=True)


def feed_many(docs: Sequence[Document]) -> Iterator[Feed]:
    """`analyze_many` as feeds (ctindex/providers/base.py): with the native
    core, each document's counts go to the segment builder's inverter as C
    data (`_words.c assemble_into`) and its dict and token list are never
    built: a sixth of a worker's time on small documents
    (docs/decisions/native.md, "Analysis fed straight to the inverter")."""
    native = _native()
    if native is None:
        yield from feeds(analyze_many(docs))
        return
    into = native.assemble_into
    for doc, fields in _batched_terms(docs):
        yield partial(into, fields, doc.type, doc.tags, _LAYOUT)


def _count_field(tfw: dict[str, int], toks: list[str], weight: int, head: str) -> None:
    """Per token: its weighted count and its field term's raw count."""
    for t in toks:
        tfw[t] = tfw.get(t, 0) + weight
        tfw[head + t] = tfw.get(head + t, 0) + 1


def _fold(
    fields: list[list[str]],
    slots: list[int],
    weights: tuple[int, ...],
    heads: tuple[str, ...],
    sep: str,
) -> tuple[list[str], dict[str, int], int, list[int]]:
    """The token stream, weighted counts, weighted length and per-slot token
    counts of `fields` ([body, field...]; field j + 1 goes to slot `slots[j]`
    of `weights` and `heads`)."""
    body = fields[0]
    tfw: dict[str, int] = Counter(body)
    length = len(body)
    tokens: list[str] = []
    flens = [0, 0, 0]
    for slot, toks in zip(slots, fields[1:], strict=True):
        tokens.extend(toks)
        tokens.append(sep)
        length += weights[slot] * len(toks)
        flens[slot] += len(toks)
        _count_field(tfw, toks, weights[slot], heads[slot])
    tokens.extend(body)
    return tokens, tfw, length, flens


def _assemble(
    fields: list[list[str]], doc_type: str, tags: tuple[str, ...], layout: _Layout
) -> _Assembled:
    """A document's token stream, weighted term counts (facet and ranking
    terms included), weighted length and per-field lengths, from the terms of
    its `_field_texts`: the specification of ctindex/providers/_words.c
    `assemble`, which builds the same counts in the same insertion order."""
    weights, heads, sep, (f_type, f_type_word, f_tag), exact = layout
    if len(fields) != len(tags) + 5:
        raise ValueError("assemble: body, title, each tag, description, ID, last segment")
    slots = [0, *([1] * len(tags)), 2]  # title, each tag, description
    tokens, tfw, length, flens = _fold(fields[:-2], slots, weights, heads, sep)
    if doc_type:
        kind = facet(doc_type)
        tfw[f_type + kind] = 1
        for w in kind.split():
            for part in words(w):
                tfw[f_type_word + part.casefold()] = 1
    for tag in tags:
        tfw[f_tag + facet(tag)] = 1
    id_terms, last = fields[-2], fields[-1]
    for t in id_terms:
        tfw[heads[3] + t] = tfw.get(heads[3] + t, 0) + 1
    title = fields[1]
    for head, seq in zip(exact, (title, id_terms, last, sorted(set(title))), strict=True):
        if seq:
            tfw[head + " ".join(seq)] = 1
    return tokens, tfw, length, (flens[0], flens[1], flens[2], len(id_terms))


def _assemble_into(
    fields: list[list[str]],
    doc_type: str,
    tags: tuple[str, ...],
    layout: _Layout,
    sink: TermSink,
) -> Lengths:
    """`_assemble`'s counts and tokens added to `sink`, its lengths returned:
    the specification of ctindex/providers/_words.c `assemble_into`."""
    tokens, tfw, length, flens = _assemble(fields, doc_type, tags, layout)
    sink.add(tfw, tokens)
    return length, flens


def _analysis(doc: Document, fields: list[list[str]], native: _WordsModule | None) -> Analysis:
    assemble = native.assemble if native is not None else _assemble
    tokens, tfw, length, flens = assemble(fields, doc.type, doc.tags, _LAYOUT)
    return Analysis(tokens=tokens, tfw=tfw, length=length, flens=flens)


class OkfMarkdown:
    """The `okf-markdown` provider as the registry hands it out
    (`ctindex.providers.load`; the interface is ctindex/providers/base.py)."""

    info: ProviderInfo = OKF_MARKDOWN
    parse = staticmethod(parse)
    analyze = staticmethod(analyze)
    analyze_many = staticmethod(analyze_many)
    feed_many = staticmethod(feed_many)
    concept_id = staticmethod(concept_id)
    concept_key = staticmethod(concept_key)
    read_concept = staticmethod(read_concept)
    fold = staticmethod(fold)
    words = staticmethod(words)
    terms = staticmethod(terms)
    normalize_term = staticmethod(normalize_term)
    term_spans = staticmethod(term_spans)
    ascii_terms = staticmethod(ascii_terms)
    facet = staticmethod(facet)


PROVIDER: Provider = OkfMarkdown()
