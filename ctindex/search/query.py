"""The query language (docs/search.md).

    query    := clause+                      all clauses must match (AND)
    clause   := unary ("OR" unary)*          OR binds tighter than the implicit AND
    unary    := "-" unary | primary
    primary  := "(" query ")" | '"' words '"' | NAME ":" value | word | word "*"
    value    := word | '"' words '"'
    NAME     := letter (letter | digit | "_" | "-")*     (ASCII, any case: TYPE:Metric)

``NAME:value`` is a field (``FIELDS``: title, description, tags/tag, type,
id, path) unless the value starts with ``/`` or ``:`` (``http://x``,
``std::vector`` are words); a NAME that is no field is an error naming the
closest field (``UnknownField``), never a silent miss. A word whose part
before the colon is not NAME-shaped (``12:30``) is a word; quoting searches
any text literally (``"note:x"``).

An explicit ``AND`` between clauses is accepted and means the implicit AND.
A word with a ``/`` (``tables/transactions``) is ID-shaped: it matches the
phrase of its words or the document whose concept ID it is (docs/search.md).

Words are analysed exactly like document text (fold, casefold, stem), so a
word that is several tokens (``gross-margin``) means the phrase of those
tokens, and ``cafe`` finds ``Café``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from ctindex.errors import QueryError, UnknownField

if TYPE_CHECKING:
    from ctindex.providers.base import Provider

__all__ = ["FIELDS", "QueryError", "UnknownField", "field_filter", "parse_query"]

# The fields a query can name, with what each matches (docs/search.md,
# "Fields"): every frontmatter key the provider indexes, the concept ID and
# the path. `tag` is `tags` (one tag is what it matches).
FIELDS: dict[str, str] = {
    "title": "the words, consecutively, in the title",
    "description": "the words, consecutively, in the description",
    "tags": "a tag, whole (case, accents and spacing aside)",
    "tag": "same as tags:",
    "type": "the type, whole, or one word of it",
    "id": "the concept whose ID it is",
    "path": "paths starting with the value",
}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


class _Node:
    """Immutable-by-convention query node with value equality. Plain slotted
    classes: a dataclass costs ~0.6 ms to create at import, and every
    search process imports these."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Node)
            and type(other) is type(self)
            and (other._values() == self._values())
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self._values()!r}"


class Term(_Node):
    __slots__ = ("term",)

    def __init__(self, term: str) -> None:
        self.term = term


class Phrase(_Node):
    __slots__ = ("terms",)

    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms


class IdWord(_Node):
    """An ID-shaped word: its terms as a phrase, or a concept ID equal to them."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms


class Prefix(_Node):
    __slots__ = ("forms",)

    def __init__(self, forms: tuple[str, ...]) -> None:
        self.forms = forms  # the casefolded prefix and, when different, its stem


class Facet(_Node):
    __slots__ = ("term",)

    def __init__(self, term: str) -> None:
        self.term = term  # the facet term (FACET_TYPE/FACET_TAG + normal form)


class Field(_Node):
    """The words `terms`, consecutively, inside one text field (`field`:
    "title" or "description", ctindex/providers/fields.py FIELDS)."""

    __slots__ = ("field", "terms")

    def __init__(self, field: str, terms: tuple[str, ...]) -> None:
        self.field = field
        self.terms = terms


class PathPrefix(_Node):
    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix


class Not(_Node):
    __slots__ = ("child",)

    def __init__(self, child: Node) -> None:
        self.child = child


class Or(_Node):
    __slots__ = ("children",)

    def __init__(self, children: tuple[Node, ...]) -> None:
        self.children = children


class And(_Node):
    __slots__ = ("children",)

    def __init__(self, children: tuple[Node, ...]) -> None:
        self.children = children


Node = Term | Phrase | IdWord | Prefix | Facet | Field | PathPrefix | Not | Or | And

_SPECIAL = '()"'


class _Tok(NamedTuple):
    kind: str  # word, phrase, lparen, rparen, or, neg
    text: str
    col: int
    field: str = ""  # for field:value tokens


def _lex(q: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(q)
    while i < n:
        c = q[i]
        if c.isspace():
            i += 1
        elif c == "(":
            toks.append(_Tok("lparen", c, i + 1))
            i += 1
        elif c == ")":
            toks.append(_Tok("rparen", c, i + 1))
            i += 1
        elif c == '"':
            end = q.find('"', i + 1)
            if end < 0:
                raise QueryError(f"query: unterminated quote at column {i + 1}")
            toks.append(_Tok("phrase", q[i + 1 : end], i + 1))
            i = end + 1
        elif c == "-" and i + 1 < n and not q[i + 1].isspace():
            toks.append(_Tok("neg", c, i + 1))
            i += 1
        else:
            j = i
            while j < n and not q[j].isspace() and q[j] not in _SPECIAL:
                j += 1
            word = q[i:j]
            name, colon, rest = word.partition(":")
            if colon and _NAME.fullmatch(name) and not rest.startswith(("/", ":")):
                field = _field_name(name, i + 1)
                quoted = not rest and j < n and q[j] == '"'
                if quoted:  # field:"quoted value"
                    end = q.find('"', j + 1)
                    if end < 0:
                        raise QueryError(f"query: unterminated quote at column {j + 1}")
                    rest, j = q[j + 1 : end], end + 1
                if not rest.strip():
                    raise QueryError(f"query: '{field}:' needs a value (column {i + 1})")
                toks.append(_Tok("qfield" if quoted else "field", rest, i + 1, field=field))
            elif word == "OR":
                toks.append(_Tok("or", word, i + 1))
            elif word == "AND":
                toks.append(_Tok("and", word, i + 1))
            elif word == "-":
                raise QueryError(f"query: '-' must be followed by a term (column {i + 1})")
            else:
                toks.append(_Tok("word", word, i + 1))
            i = j
    return toks


class _Parser:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.pos = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def query(self, closing: bool) -> Node:
        clauses: list[Node] = []
        while (tok := self.peek()) is not None and tok.kind != "rparen":
            if tok.kind == "and":  # explicit AND: the implicit one, with a term each side
                self.take()
                nxt = self.peek()
                if not clauses or nxt is None or nxt.kind in ("rparen", "or", "and"):
                    raise QueryError(f"query: 'AND' at column {tok.col} needs a term on both sides")
                continue
            clauses.append(self.clause())
        if not closing and self.peek() is not None:
            raise QueryError(f"query: unmatched ')' at column {self.take().col}")
        if not clauses:
            raise QueryError("query: empty query" if not closing else "query: empty parentheses")
        return clauses[0] if len(clauses) == 1 else And(tuple(clauses))

    def clause(self) -> Node:
        first = self.unary()
        alts = [first]
        while (tok := self.peek()) is not None and tok.kind == "or":
            self.take()
            nxt = self.peek()
            if nxt is None or nxt.kind in ("rparen", "or", "and"):
                raise QueryError(f"query: 'OR' at column {tok.col} needs a term on both sides")
            alts.append(self.unary())
        return alts[0] if len(alts) == 1 else Or(tuple(alts))

    def unary(self) -> Node:
        tok = self.take()
        if tok.kind == "neg":
            if self.peek() is None or self.peek().kind in ("rparen", "or", "and"):  # type: ignore[union-attr]
                raise QueryError(f"query: '-' at column {tok.col} must be followed by a term")
            return Not(self.unary())
        if tok.kind in ("or", "and"):
            raise QueryError(f"query: '{tok.text}' at column {tok.col} needs a term on both sides")
        if tok.kind == "lparen":
            inner = self.query(closing=True)
            if self.peek() is None:
                raise QueryError(f"query: '(' at column {tok.col} is never closed")
            self.take()
            return inner
        if tok.kind == "rparen":
            raise QueryError(f"query: unmatched ')' at column {tok.col}")
        if tok.kind == "phrase":
            return _words(tok.text, tok.col, quoted=True)
        if tok.kind in ("field", "qfield"):
            return _field(tok)
        return _word(tok)


def _analysis() -> Provider:
    """How query text becomes terms: the index provider's rules, the ones
    its documents were analysed with (ctindex/providers/base.py)."""
    from ctindex.providers import INDEX_PROVIDER, load

    return load(INDEX_PROVIDER)


def _words(text: str, col: int, quoted: bool) -> Node:
    found = _analysis().terms(text)
    if not found:
        what = f'"{text}"' if quoted else repr(text)
        raise QueryError(f"query: {what} at column {col} holds no searchable word")
    return Term(found[0]) if len(found) == 1 else Phrase(tuple(found))


def _word(tok: _Tok) -> Node:
    text = tok.text
    inner = text.rstrip("*")
    if "*" in inner:
        raise QueryError(
            f"query: {text!r} at column {tok.col}: '*' may only end a word (a prefix like 'marg*')"
        )
    if not text.endswith("*"):
        if "/" in text.strip("/"):
            found = tuple(_analysis().terms(text))
            if found:
                return IdWord(found)
        return _words(text, tok.col, quoted=False)
    provider = _analysis()
    stem = text.rstrip("*")
    parts = provider.words(stem)  # folded: café* is cafe*
    if len(parts) != 1 or parts[0] != provider.fold(stem):
        raise QueryError(
            f"query: prefix {text!r} at column {tok.col} must be one word followed by '*'"
        )
    folded = parts[0].casefold()
    stemmed = provider.normalize_term(stem)
    forms = (folded,) if stemmed == folded else (folded, stemmed)
    return Prefix(forms)


def _field_name(name: str, col: int) -> str:
    """The field `name` stands for (any case), or UnknownField naming the
    closest ones."""
    field = name.lower()
    if field in FIELDS:
        return field
    import difflib

    close = tuple(difflib.get_close_matches(field, FIELDS, n=3))
    hint = f"; did you mean {close[0]!r}?" if close else ";"
    raise UnknownField(
        f"query: unknown field {name!r} at column {col}{hint} fields: "
        f'{", ".join(sorted(FIELDS))} (quote a word with a colon to search it: "{name}:…")',
        field=name,
        suggestions=close,
    )


def _field(tok: _Tok) -> Node:
    from ctindex.providers.fields import EXACT_ID, FACET_TAG, FACET_TYPE, FACET_TYPE_WORD

    if tok.field == "path":
        prefix = tok.text.strip()
        while prefix.startswith("./"):
            prefix = prefix[2:]
        return PathPrefix(prefix.lstrip("/"))
    if tok.field in ("title", "description", "id"):
        if tok.kind == "field" and tok.text.endswith("*"):
            raise QueryError(
                f"query: '{tok.field}:' at column {tok.col} takes words, not a prefix "
                f"({tok.text!r})"
            )
        found = tuple(_analysis().terms(tok.text))
        if not found:
            raise QueryError(
                f"query: '{tok.field}:' at column {tok.col} holds no searchable word ({tok.text!r})"
            )
        if tok.field == "id":  # the concept whose ID's words these are, in order
            return Facet(EXACT_ID + " ".join(found))
        return Field(tok.field, found)
    head = FACET_TYPE if tok.field == "type" else FACET_TAG
    value = _analysis().facet(tok.text)
    if tok.field == "type" and " " not in value:
        # One word matches the whole type or any word of it (type:bigquery
        # finds "BigQuery Table").
        return Or((Facet(head + value), Facet(FACET_TYPE_WORD + value)))
    return Facet(head + value)


def field_filter(field: str, value: str) -> Node:
    """`field:value` (type, tag or path) as a query reads it, for a caller
    holding the value itself: no quoting, any character (ctindex/search/listing.py)."""
    if field not in ("type", "tag", "path"):
        raise QueryError(f"query: unknown field {field!r} (type, tag or path)")
    if not value.strip():
        raise QueryError(f"query: '{field}:' needs a value")
    return _field(_Tok("field", value, 1, field=field))


# Parsed queries by their text: a long-lived reader (ctindex/api.py, the
# MCP server) is asked the same queries again, and a parse (tokenizing and
# stemming its words) is a pure function of the text whose nodes are never
# changed (tuples all through). Bounded; a malformed query is never kept.
PARSED_MAX = 256
_parsed: dict[str, Node] = {}


def parse_query(q: str) -> Node:
    """Parse a query string; QueryError (exit 2) names the column at fault."""
    got = _parsed.get(q)
    if got is None:
        got = _Parser(_lex(q)).query(closing=False)
        if len(_parsed) >= PARSED_MAX:
            _parsed.clear()
        _parsed[q] = got
    return got
