"""Text from files and names made safe to print on a terminal
(docs/cli.md, "Control characters in output").

A title, tag, snippet, path or document body is data: written to a terminal
as it is, an ESC could clear the screen, set the window title or hide the
freshness line (`ESC[8m`), a carriage return could overwrite a line, a
newline in a folder name could make one `--paths` entry two, and a bidi
override could reorder what is shown (CVE-2021-42574, "Trojan Source").
Every text renderer passes data through this module, whatever the colour
setting and whether or not stdout is a terminal (a pipe into `less -R` is
one later). `--json` never does: JSON escapes control characters itself.

Escaped characters (`SPECIAL`): C0 controls (U+0000-U+001F), DEL, C1
controls (U+0080-U+009F), the bidi embeddings, overrides and isolates
(U+202A-U+202E, U+2066-U+2069), the line and paragraph separators
(U+2028, U+2029: Python's `splitlines` and some terminals break lines
there) and lone surrogates (a name that is not UTF-8: `\\udcXX` stands for
the byte XX, as in JSON). They are written as Python writes them in
`ascii()` (the form error messages already use, ctindex/errors.py `shown`):
`\\t`, `\\n`, `\\r`, `\\xHH` below U+0100, `\\uHHHH` above. Everything else
is kept, other invisible characters included (zero-width joiners, the
left-to-right and right-to-left marks, no-break spaces), because real text
in many scripts needs them and none of them moves the cursor or reorders
a line.

Three forms:

* `field`: one string of data (a path, ID, title, tag, snippet); one line.
  It is injective: a backslash that would otherwise read as the start of an
  escape (one followed by another backslash, `x`, `u`, `t`, `n`, `r`, or an
  escaped character) is doubled, so two distinct names never print the
  same (tests/ctindex/base/test_printable.py decodes it back). Other
  backslashes (`C:\\Users`, `\\d+`) stay single.
* `line`: a message composed of our words and data (a note, an error); one
  line; backslashes are left alone, as a message may quote text escaped
  already (error messages are, by ctindex/errors.py `shown`).
* `document`: `show`'s text of a file; tabs, newlines and a carriage return
  before a newline (CRLF line ends) are kept, so `show ID > copy.md` gives
  the file back whenever it holds no other control character; backslashes
  are left alone.

Standard library only, and nothing but `re` (already loaded by argparse):
the daemon renders every search it answers with this.
"""

from __future__ import annotations

import re

_NOT_C0 = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
SPECIAL = "\x00-\x1f" + _NOT_C0  # a regular expression character class's body
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# What may follow a backslash that starts an escape (the forms above).
_ESCAPE_STARTS = "\\\\xutnr"

_FIELD = re.compile(f"[{SPECIAL}]|\\\\(?=[{_ESCAPE_STARTS}{SPECIAL}])")
_LINE = re.compile(f"[{SPECIAL}]")
# Tab and newline kept; a carriage return only at the end of a CRLF line.
_DOCUMENT = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_NOT_C0}]|\r(?!\n)")


def _escaped(found: re.Match[str]) -> str:
    char = found.group()
    if char == "\\":
        return "\\\\"
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def field(text: str) -> str:
    """One string of data as one printable line, distinct strings distinct."""
    return _FIELD.sub(_escaped, text)


def line(text: str) -> str:
    """A composed message as one printable line; backslashes as they are."""
    return _LINE.sub(_escaped, text)


def document(text: str) -> str:
    """A file's text for `show`: its tabs, newlines and CRLF line ends kept."""
    return _DOCUMENT.sub(_escaped, text)
