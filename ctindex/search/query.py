"""The query language (docs/search.md).

    query    := clause+                      all clauses must match (AND)
    clause   := unary ("OR" unary)*          OR binds tighter than the implicit AND
    unary    := "-" unary | primary
    primary  := "(" query ")" | '"' words '"' | FIELD ":" value | word | word "*"
    FIELD    := type | tag | path           (any case: TYPE:Metric)

An explicit ``AND`` between clauses is accepted and means the implicit AND.
A word with a ``/`` (``tables/transactions``) is ID-shaped: it matches the
phrase of its words or the document whose concept ID it is (docs/search.md).

Words are analysed exactly like document text (casefold, stem), so a word that
is several tokens (``gross-margin``) means the phrase of those tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ctindex.errors import QueryError

if TYPE_CHECKING:
    from ctindex.providers.base import Provider

__all__ = ["QueryError", "field_filter", "parse_query"]


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


Node = Term | Phrase | IdWord | Prefix | Facet | PathPrefix | Not | Or | And

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
            name = name.lower()  # field names are case-insensitive (TYPE:Metric)
            if colon and name in ("type", "tag", "path"):
                if not rest and j < n and q[j] == '"':  # field:"quoted value"
                    end = q.find('"', j + 1)
                    if end < 0:
                        raise QueryError(f"query: unterminated quote at column {j + 1}")
                    rest, j = q[j + 1 : end], end + 1
                if not rest.strip():
                    raise QueryError(f"query: '{name}:' needs a value (column {i + 1})")
                toks.append(_Tok("field", rest, i + 1, field=name))
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
        if tok.kind == "field":
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
    parts = provider.words(stem)
    if len(parts) != 1 or parts[0] != stem:
        raise QueryError(
            f"query: prefix {text!r} at column {tok.col} must be one word followed by '*'"
        )
    folded = stem.casefold()
    stemmed = provider.normalize_term(stem)
    forms = (folded,) if stemmed == folded else (folded, stemmed)
    return Prefix(forms)


def _field(tok: _Tok) -> Node:
    from ctindex.providers.fields import FACET_TAG, FACET_TYPE, FACET_TYPE_WORD

    if tok.field == "path":
        prefix = tok.text.strip()
        while prefix.startswith("./"):
            prefix = prefix[2:]
        return PathPrefix(prefix.lstrip("/"))
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


def parse_query(q: str) -> Node:
    """Parse a query string; QueryError (exit 2) names the column at fault."""
    return _Parser(_lex(q)).query(closing=False)
