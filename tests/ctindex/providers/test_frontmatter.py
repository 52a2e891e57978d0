"""The YAML-free frontmatter reader must agree with libyaml on whatever it accepts.

`frontmatter.read_without_yaml` reads block YAML of the usual shape without
PyYAML (the rebuild's hot path); anything it is unsure of goes to
`load_yaml`. These tests hold it to exactly the same result on generated
YAML -- well-formed blocks of every shape it reads, and the same blocks
broken line by line -- and on the bundles in fixtures/okf-bundles.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctindex.providers import frontmatter as fm
from ctindex.providers import okf_markdown as okf

ROOT = Path(__file__).resolve().parents[3]

# Mostly characters the reader accepts, with every YAML indicator and
# line-break oddity it must refuse mixed in.
_SAFE = "abXY09 _é.,;()/'+-=$↔"
_RISKY = ':#[]{}"~&*!?|>%@`\t\r\u2028\u2029\x85\ufeff\\'
_chars = st.sampled_from(_SAFE * 6 + _RISKY)
_word = st.one_of(
    st.text(st.sampled_from(_SAFE), min_size=1, max_size=10),
    st.text(st.sampled_from(_SAFE), min_size=1, max_size=10),
    st.text(_chars, min_size=1, max_size=10),
    st.sampled_from(
        [
            "null",
            "Null",
            "NULL",
            "~",
            "yes",
            "2026",
            "Foo Bar",
            "a'b",
            'a"b',
            "x, y",
            "a: b",
            "x #c",
            "https://bigquery.googleapis.com/v2/projects/p",
            "2026-07-10T23:16:28+00:00",
            "human:jsmith@acme",
            "a [b] {c}",
            "2026-06-30T14:00:00Z",
            "a:?b",
            "a:,",
            "x:/y",
            "-5",
            "- a",
            "?x",
            ":x",
            "&anchor x",
            "*alias",
            "!!str x",
            "|",
            ">",
            "%x",
            "x:",
            "#",
            "...",
            "---",
        ]
    ),
)
_key = st.sampled_from(
    ["title", "type", "description", "tags", "id", "by", "x-y", "Title", "9a", "a b", "k_"]
)


def _plain(words: list[str], breaks: list[int], indent: str) -> str:
    """Words joined by spaces or by line breaks (0: a space; n: n breaks)."""
    out = words[0]
    for word, n in zip(words[1:], breaks, strict=False):
        out += " " + word if n == 0 else "\n" * n + indent + word
    return out


@st.composite
def _scalar(draw: st.DrawFn, indent: str) -> str:
    style = draw(st.sampled_from(["plain", "plain", "single", "double", "flow", "map"]))
    words = draw(st.lists(_word, min_size=1, max_size=4))
    note = draw(st.sampled_from(["", "", "", " # note", "  #n", " #", "#x"]))
    return draw(_styled(style, words, indent)) + note


@st.composite
def _styled(draw: st.DrawFn, style: str, words: list[str], indent: str) -> str:
    if style == "plain":
        breaks = draw(st.lists(st.sampled_from([0, 0, 1, 2]), max_size=3))
        more = draw(st.sampled_from(["", " ", "  "]))
        return _plain(words, breaks, indent + " " + more)
    if style == "single":
        return "'" + " ".join(w.replace("'", "''") for w in words) + "'"
    if style == "double":
        return '"' + " ".join(w.replace('"', "") for w in words) + '"'
    sep = draw(st.sampled_from([", ", ",", " , "]))
    if style == "map":
        keys = draw(st.lists(_key, min_size=len(words), max_size=len(words)))
        colon = draw(st.sampled_from([": ", ":  ", ":"]))
        pairs = [f"{k}{colon}{w}" for k, w in zip(keys, words, strict=True)]
        return "{" + draw(st.sampled_from(["", " "])) + sep.join(pairs) + " }"
    return "[" + sep.join(words) + "]" if words != ["~"] else "[]"


@st.composite
def _block(draw: st.DrawFn) -> str:
    """A block mapping at column 0, each value rendered inline or below its key."""
    lines: list[str] = []
    for key in draw(st.lists(_key, min_size=1, max_size=6)):
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["# note", "  # indented note", "#"])))
        kind = draw(st.sampled_from(["scalar", "scalar", "seq", "map", "empty"]))
        if kind == "empty":
            lines.append(f"{key}:")
        elif kind == "scalar":
            lines.append(f"{key}: {draw(_scalar(''))}")
        else:
            lines.append(f"{key}:")
            step = (
                draw(st.sampled_from([0, 2, 3])) if kind == "seq" else draw(st.sampled_from([1, 2]))
            )
            _seq_or_map(draw, kind, step, lines)
    # Break about half of the blocks, a line at a time.
    mutate = draw(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 15), _chars), max_size=2))
    for at, how, char in mutate:
        i = at % len(lines)
        line = lines[i]
        j = at % (len(line) + 1)
        if how == 0:
            lines[i] = line[:j] + char + line[j:]
        elif how == 1:
            lines[i] = line[:j] + line[j + 1 :]
        elif how == 2:
            lines[i] = " " + line
        elif how == 3:
            lines[i] = line[1:]
        elif how == 4:
            lines.insert(i, "")
        elif how == 5:
            lines.insert(i, lines[i])
        elif how == 6:
            lines.insert(i, " " * (at % 4) + "# c")
        elif how == 7:
            lines[i] = line + " "
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n", "\n  \n"]))


def _seq_or_map(draw: st.DrawFn, kind: str, step: int, lines: list[str]) -> None:
    """The block below a `key:` line: a list (at `step` columns, 0 for the
    indentless form) or a mapping, of scalars and compact `- k: v` items."""
    pad = " " * step
    for _ in range(draw(st.integers(1, 4))):
        if kind == "map":
            lines.append(f"{pad}{draw(_key)}: {draw(_scalar(pad))}")
            continue
        item = draw(st.sampled_from(["scalar", "scalar", "map", "empty", "nested"]))
        if item == "scalar":
            lines.append(f"{pad}- {draw(_scalar(pad))}")
        elif item == "empty":
            lines.append(f"{pad}-")
        elif item == "nested":
            lines.append(f"{pad}-")
            lines.append(f"{pad}  - {draw(_scalar(pad + '  '))}")
        else:
            keys = draw(st.lists(_key, min_size=1, max_size=3))
            inner = pad + "  "
            for n, key in enumerate(keys):
                lines.append(f"{pad}- {key}: " if n == 0 else f"{inner}{key}: ")
                lines[-1] += draw(_scalar(inner))


def _yaml(block: str) -> object:
    return fm.load_yaml(block)  # must not raise either where the reader accepted


# Each run draws new blocks (the examples are not derandomised), so the
# runs add up: 1,000 a run, on both paths, is most of a minute of CI.
@settings(max_examples=1000, deadline=None)
@given(_block())
@pytest.mark.slow
def test_the_reader_agrees_with_libyaml(block: str) -> None:
    fast = fm.read_without_yaml(block)
    if fast is not None:
        assert fast == _yaml(block), block


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a: b", "  - x", "- y", "k:", "  k: v", " z", "", "#"]), max_size=8)
)
def test_the_reader_agrees_with_libyaml_on_line_soup(lines: list[str]) -> None:
    block = "\n".join(lines)
    fast = fm.read_without_yaml(block)
    if fast is not None:
        assert fast == _yaml(block), block


@pytest.mark.parametrize(
    ("block", "want"),
    [
        (
            "title: Kazo Ripra\ntype: Metric\ndescription: the ratio of a, b (per day)\n"
            "tags: [votes, posts , null]\nowner: data-team\n",
            {
                "title": "Kazo Ripra",
                "type": "Metric",
                "description": "the ratio of a, b (per day)",
                "tags": ["votes", "posts", None],
            },
        ),
        (  # a dumper's shape: folded plain lines, indentless lists, nested maps
            "type: BigQuery Table\nresource: https://x.example/a/b\ntitle: Outputs ↔ Inputs\n"
            "description: Outputs from all transactions, including script details\n"
            "  and values\n\n  in Satoshis.\ntags:\n- bitcoin\n- utxo\ngenerated:\n"
            "  by: agent/x\n  at: '2026-07-10T23:16:28+00:00'\nsources:\n- id: etl\n"
            "  resource: https://github.com/x/y\n- title: Meta\n  id: t\n",
            {
                "type": "BigQuery Table",
                "title": "Outputs ↔ Inputs",
                "description": "Outputs from all transactions, including script details"
                " and values\nin Satoshis.",
                "tags": ["bitcoin", "utxo"],
            },
        ),
        (
            "title: 'it''s'\ntype: \"a # b\"\ntags:\n  -\n  - [a]\n  - k: v\n  - ~\ndescription:",
            {
                "title": "it's",
                "type": "a # b",
                "tags": [None, fm.NOT_SCALAR, fm.NOT_SCALAR, None],
                "description": None,
            },
        ),
        (
            "title:\n  spread\n over lines\ntype: {a: b}\n",
            {"title": "spread over lines", "type": fm.NOT_SCALAR},
        ),
        ("title: t\ntype: {a: b,\n  c: d}\n", None),  # over lines: YAML's
        (  # comments: whole lines between entries, and after values
            "# about\ntitle: x # note\ntype: 'q' # n\ntags:\n# c\n- a #c\n  # c2\n- [b] # n\n"
            "description: one\n  two # end\n\n# c\nother: # n\n",
            {"title": "x", "type": "q", "tags": ["a", fm.NOT_SCALAR], "description": "one two"},
        ),
        (
            "description: foo\n  # an indented comment line ends it\ntype: t",
            {"description": "foo", "type": "t"},
        ),
    ],
)
def test_named_shapes(block: str, want: object) -> None:
    assert fm.read_without_yaml(block) == want
    if want is not None:
        assert fm.load_yaml(block) == want


@pytest.mark.parametrize(
    "block",
    [
        "title: a: b\n",
        "title: 'x'#c\n",
        "description: foo\n  # a comment ends the scalar\n  bar\n",
        "description: foo\n  bar # so does this one\n  baz\n",
        "title: a\n  continued: x\n",
        "tags: [a, b,]\n",
        "title: x\r\n",
        "title: 'open\n  quote'\n",
        'title: "a\\tb"\n',
        "title: &a x\n",
        "title: |\n  text\n",
        "  title: x\n",
        "- a\n",
        "title: x\n  - y\n",
        "tags:\n  - a\n - b\n",
        "\n",
        "",
    ],
)
def test_the_reader_refuses_what_it_does_not_read(block: str) -> None:
    assert fm.read_without_yaml(block) is None


def test_colons_in_flow_collections() -> None:
    """`[a: b]` holds a one-pair mapping and `[a:]` is an error: a colon in
    a flow item or value is read here only before a letter, a digit or `/`."""
    for block in ("tags: [a: b]", "tags: [x, a:]", "g: {by: a:}", "g: {by: a:?b}", "g: {a}"):
        assert fm.read_without_yaml(block) is None, block
    for block in (
        "tags: [a:b, http://x]",
        "title: t\ng: { by: human:j@x, at: 2026-06-30T14:00:00Z }",
    ):
        got = fm.read_without_yaml(block)
        assert got is not None and got == fm.load_yaml(block), block


def test_nesting_is_bounded() -> None:
    """Deep nesting is read up to `_MAX_DEPTH` levels, then left to YAML:
    never a RecursionError, whatever the block."""
    for depth, read in ((20, True), (30, False), (5000, False)):
        block = "title: t\nx:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth))
        got = fm.read_without_yaml(block)
        assert (got is not None) == read
        if read:
            assert got == fm.load_yaml(block) == {"title": "t"}


def _bundle_blocks() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "fixtures" / "okf-bundles").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("---\n"):
            found = fm.CLOSING.search(text, 4)
            assert found is not None
            out.append((str(path.relative_to(ROOT)), text[4 : found.start()]))
    return out


def test_the_bundles_are_read_without_yaml_as_libyaml_reads_them() -> None:
    """Every frontmatter block of the four bundles, dumped and hand-written,
    is read here, to the same fields."""
    blocks = _bundle_blocks()
    assert len(blocks) > 40
    for name, block in blocks:
        got = fm.read_without_yaml(block)
        assert got is not None and got == fm.load_yaml(block), name


def test_parse_is_the_same_with_and_without_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        b"---\ntitle: Null\ntype: Table\ntags: [a_b, c, c]\ndescription: x\nsources:\n"
        b"- id: s\n  title: T\n---\n# Heading\nbody words\n"
    )
    fast = okf.parse("kb/x.md", text, "kb")
    monkeypatch.setattr(fm, "_native_reader", lambda: None)
    monkeypatch.setattr(fm, "read_without_yaml", lambda block: None)
    monkeypatch.setattr(okf, "_native", lambda: None)
    slow = okf.parse("kb/x.md", text, "kb")
    assert fast == slow
    assert fast.title == "Heading" and fast.tags == ("a_b", "c")  # type: ignore[union-attr]


def _closing_line_oracle(text: str) -> tuple[int, int] | None:
    """(start, end) of the closing line, found line by line: the definition
    the provider's single regex search must agree with."""
    pos = text.index("\n") + 1
    while pos <= len(text):
        nl = text.find("\n", pos)
        line_end = len(text) if nl < 0 else nl
        if text[pos:line_end].rstrip("\r") in ("---", "..."):
            return pos, line_end
        if nl < 0:
            return None
        pos = nl + 1
    return None


@settings(max_examples=400, deadline=None)
@given(
    opening=st.sampled_from(["---\n", "---\r\n"]),
    rest=st.lists(st.sampled_from(["---", "...", "\r", "\n", "a: b", " ", "--", "."]), max_size=14),
)
def test_the_closing_line_is_found_as_line_by_line(opening: str, rest: list[str]) -> None:
    text = opening + "".join(rest)
    found = fm.CLOSING.search(text, text.index("\n") + 1)
    assert (None if found is None else (found.start(), found.end())) == _closing_line_oracle(text)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("---\ntitle: a\nb: c: d\n---\nbody\n", "at line 3, column 5: mapping values are not"),
        ("---\ntitle: a\ntags: [x, y\nz: 1\n---\n", "at line 4, column 2: "),
        ('---\ntitle: "open\n---\n', "at line 3, column 1: found unexpected end of stream"),
    ],
)
def test_a_yaml_error_names_the_file_line_and_column(text: str, where: str) -> None:
    """PyYAML's problem mark, counted in the file (the block starts on line 2)."""
    meta, body, warning = fm.split(text)
    assert meta == {} and body == text and warning is not None
    assert warning.startswith(f"malformed YAML frontmatter {where}")
    assert warning.endswith("; indexed as plain text")
