"""The user-facing error types (ctindex/errors.py): one printable line each,
and the exit codes the module docstring's tree promises."""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ctindex.errors as errors
from ctindex.base.durable import WriteFailed
from ctindex.errors import (
    AmbiguousConcept,
    ConceptNotFound,
    CtindexError,
    IndexCorrupt,
    IndexFormatChanged,
    ShareHostWrites,
    UnknownField,
    WrongType,
    shown,
)

HOSTILE = "a\nb\rc\x00d\udc80e\u2028f\x1bg\x85h\ttab"


@given(st.text())
@example(HOSTILE)
@example("\udcff\ud800")  # lone surrogates: an undecodable byte, and nothing
def test_shown_is_one_printable_encodable_line(text: str) -> None:
    line = shown(text)
    assert line.isprintable()
    assert len(line.splitlines()) <= 1  # none of str.splitlines' breaks survive
    line.encode("utf-8")  # no lone surrogate left: writable as UTF-8 anywhere


@given(st.text())
def test_shown_is_idempotent(text: str) -> None:
    assert shown(shown(text)) == shown(text)


@given(st.text().filter(str.isprintable))
def test_shown_leaves_printable_text_alone(text: str) -> None:
    assert shown(text) == text


def test_shown_spells_what_it_escapes_as_python_does() -> None:
    assert shown("a\nb") == "a\\nb"
    assert shown("tab\there") == "tab\\there"
    assert shown("nul\x00") == "nul\\x00"
    assert shown("byte \udc80") == "byte \\udc80"
    assert shown("sep\u2028") == "sep\\u2028"
    assert shown("caf\u00e9 \u6587") == "caf\u00e9 \u6587"  # printable non-ASCII kept


@functools.cache
def _all_error_types() -> list[type[CtindexError]]:
    """Every CtindexError subclass of the package: each module of ctindex is
    imported first, so the ones defined where they are raised are found."""
    import pkgutil

    import ctindex

    for module in pkgutil.walk_packages(ctindex.__path__, "ctindex."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: list[type[CtindexError]] = []
    pending: list[type[CtindexError]] = [CtindexError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def _instance(cls: type[CtindexError], message: str) -> CtindexError:
    if issubclass(cls, UnknownField):
        return cls(message, field=message, suggestions=(message,))
    if issubclass(cls, ConceptNotFound):
        return cls(message, (message, "x"))
    if issubclass(cls, WriteFailed):
        return cls(message, "write", OSError(28, "No space left on device"), Path("x"))
    if issubclass(cls, AmbiguousConcept):
        return cls(message, (message, "b/x.md"))
    if issubclass(cls, WrongType):
        return cls(message, message, message, bytes)
    if issubclass(cls, ShareHostWrites):
        return cls(message, message)
    return cls(message)


@settings(deadline=None)  # the first example imports the whole package
@given(st.text())
@example(HOSTILE)
def test_every_error_reads_as_one_line_whatever_its_message_holds(message: str) -> None:
    # OutputError and IndexReadOnly are defined where they are raised.
    import ctindex.base.output
    import ctindex.store.lock

    assert ctindex.base.output.OutputError in _all_error_types()
    assert ctindex.store.lock.IndexReadOnly in _all_error_types()

    for cls in _all_error_types():
        text = str(_instance(cls, message))
        assert text.isprintable(), cls
        assert len(text.splitlines()) <= 1, cls


# The tree in the module docstring, parsed: every name, its parent and its exit code.
_TREE_LINE = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)\s+(?P<note>.*)$")


def _documented_tree() -> list[tuple[str, str | None, int]]:
    assert errors.__doc__
    rows: list[tuple[str, str | None, int]] = []
    parents: list[str] = []
    for line in errors.__doc__.splitlines():
        match = _TREE_LINE.match(line[4:]) if line.startswith("    ") else None
        if not match:
            continue
        depth = len(match["indent"]) // 4 + (1 if "──" in line else 0)
        del parents[depth:]
        note = match["note"]
        code = int(m[1]) if (m := re.search(r"exit (\d+)", note)) else 2
        rows.append((match["name"], parents[-1] if parents else None, code))
        parents.append(match["name"])
    return rows


def test_the_docstring_tree_is_parsed_whole() -> None:
    names = [name for name, _parent, _code in _documented_tree()]
    assert names[0] == "CtindexError"
    assert len(names) == 22, names


def test_the_docstring_tree_lists_every_error_type_of_the_package() -> None:
    documented = {name for name, _parent, _code in _documented_tree()}
    assert {cls.__name__ for cls in _all_error_types()} == documented


def _error_class(name: str) -> type[CtindexError]:
    return next(cls for cls in _all_error_types() if cls.__name__ == name)


@pytest.mark.parametrize(("name", "parent", "code"), _documented_tree())
def test_each_error_has_the_parent_and_exit_code_its_docstring_says(
    name: str, parent: str | None, code: int
) -> None:
    cls = _error_class(name)
    if parent is not None:
        # The tree's parent first; after it, built-in exceptions only (WrongType
        # is a TypeError too: the module docstring says so).
        assert cls.__bases__[0] is _error_class(parent)
        assert all(b.__module__ == "builtins" for b in cls.__bases__[1:])
    assert cls.exit_code == code
    assert _instance(cls, "x").exit_code == code


def test_a_format_change_is_read_as_corruption_and_exits_2() -> None:
    assert issubclass(IndexFormatChanged, IndexCorrupt)
    assert IndexFormatChanged("x").exit_code == 2


def test_concept_not_found_names_the_id_and_its_close_matches() -> None:
    error = ConceptNotFound("revenu", ("revenue", "revenues"))
    assert str(error) == "revenu: no such concept; did you mean revenue, revenues?"
    assert error.concept_id == "revenu" and error.suggestions == ("revenue", "revenues")
    assert error.no_scopes is None and error.exit_code == 1
    assert str(ConceptNotFound("zzz")) == "zzz: no such concept"


def test_concept_not_found_keeps_the_raw_id_but_shows_it_escaped() -> None:
    error = ConceptNotFound("two\nlines", ("two lines",))
    assert error.concept_id == "two\nlines"  # API users get what they passed
    assert str(error) == "two\\nlines: no such concept; did you mean two lines?"


def test_ambiguous_concept_names_every_candidate() -> None:
    error = AmbiguousConcept("orders", ("a/orders.md", "b/orders.md"))
    assert str(error) == (
        "orders: ambiguous concept ID, found in 2 scopes: a/orders.md, b/orders.md "
        "(name one by its path or scope)"
    )
    assert error.candidates == ("a/orders.md", "b/orders.md") and error.exit_code == 2


def test_unknown_field_carries_the_field_and_suggestions() -> None:
    error = UnknownField("titel: no such field", field="titel", suggestions=("title",))
    assert error.field == "titel" and error.suggestions == ("title",)
    assert str(error) == "titel: no such field"
