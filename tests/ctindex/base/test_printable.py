"""ctindex/base/printable.py: data made safe for a terminal. Whatever a string
holds, what is printed holds no C0/C1 control, bidi override or isolate,
line separator or lone surrogate; `field` is injective (decoded back
here); `document` keeps a file's tabs, newlines and CRLF line ends."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from ctindex.base import printable

SPECIAL = re.compile(f"[{printable.SPECIAL}]")
BIDI = [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
# Text that is mostly the characters that matter: controls, bidi, surrogates,
# backslashes and the letters of the escapes, among ordinary text.
NASTY = st.lists(
    st.one_of(
        st.sampled_from(["\\", "x", "u", "n", "t", "r", "0", "1", "b", "\r\n", "[", "]"]),
        st.characters(max_codepoint=0xA0),
        st.sampled_from([*BIDI, "\u2028", "\u2029", "\ud800", "\udcff", "\udc9b", "\u200d"]),
        st.characters(),
    )
).map("".join)


def decode_field(shown: str) -> str:
    """The inverse of `printable.field`, written from its documented rules:
    `\\\\` a backslash; `\\xHH`, `\\uHHHH`, `\\t`, `\\n`, `\\r` the character;
    any other backslash itself."""
    named = {"\\\\": "\\", "\\t": "\t", "\\n": "\n", "\\r": "\r"}
    return re.sub(
        r"\\(?:\\|x[0-9a-f]{2}|u[0-9a-f]{4}|[tnr])",
        lambda m: named.get(m.group()) or chr(int(m.group()[2:], 16)),
        shown,
    )


@given(NASTY)
@example("\x1b[2J\x1b]0;title\x07\x1b[8m\r\n\u202eevil\udcff")
@example("\\x1b\x1b\\\x1b\\")
def test_field_is_one_printable_line_and_decodes_back(text: str) -> None:
    shown = printable.field(text)
    assert SPECIAL.search(shown) is None
    shown.encode("utf-8")  # no lone surrogate left: strict UTF-8 takes it
    assert decode_field(shown) == text  # so distinct strings print distinctly


@given(NASTY, NASTY)
def test_distinct_fields_stay_distinct(a: str, b: str) -> None:
    assert (printable.field(a) == printable.field(b)) == (a == b)


@given(NASTY)
def test_line_escapes_the_same_characters_and_leaves_backslashes(text: str) -> None:
    shown = printable.line(text)
    assert SPECIAL.search(shown) is None
    assert shown.count("\\") >= text.count("\\")
    assert printable.line(shown) == shown  # a message escaped already is kept
    if SPECIAL.search(text) is None:
        assert shown == text


@given(NASTY)
def test_document_keeps_tabs_newlines_and_crlf_only(text: str) -> None:
    shown = printable.document(text)
    left = SPECIAL.findall(shown.replace("\r\n", ""))
    assert set(left) <= {"\t", "\n"}
    if SPECIAL.search(text.replace("\r\n", "").replace("\t", "").replace("\n", "")) is None:
        assert shown == text  # such a file is printed exactly: `show > copy` holds


def test_the_escapes_are_pythons() -> None:
    """The form error messages use (ctindex/errors.py `shown`): ascii()'s."""
    for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *map(ord, BIDI)]:
        assert printable.field(chr(code)) == ascii(chr(code))[1:-1]
    for code in (0xD800, 0xDC80, 0xDCFF, 0xDFFF):
        assert printable.field(chr(code)) == f"\\u{code:04x}"


def test_examples() -> None:
    f = printable.field
    assert f("okf/evil\x1b[2J\ndir\u202e/doc") == "okf/evil\\x1b[2J\\ndir\\u202e/doc"
    assert f("caf\udce9.md") == "caf\\udce9.md"  # the byte 0xE9 of a latin-1 name
    assert f("\x9b") == "\\x9b"  # the C1 CSI, not the same as the byte 0x9B
    assert f("\udc9b") == "\\udc9b"
    # Backslashes are doubled only where they would read as an escape.
    assert f(r"C:\Users\new\d+") == r"C:\Users\\new\d+"
    assert f("\\x1b") == "\\\\x1b" and f("\x1b") == "\\x1b"
    assert f("a\\\x1b") == "a\\\\\\x1b"
    # Real text in any script is kept: joiners, marks, no-break spaces, CJK.
    kept = "Caf\u00e9 \u0645\u0631\u062d\u0628\u0627\u200f \U0001f469\u200d\U0001f4bb"
    kept += " \u3000\u65e5\u672c \u00a0 \u00ad"
    assert f(kept) == kept
    assert printable.line("a\\nb\n") == "a\\nb\\n"
    doc = "---\ntitle: x\n---\r\n\tbody \x1b[8mhidden\rover\x00\n"
    assert printable.document(doc) == "---\ntitle: x\n---\r\n\tbody \\x1b[8mhidden\\rover\\x00\n"
