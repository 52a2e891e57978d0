"""`frontmatter.whole_mapping`: the whole frontmatter as JSON values (what
`show --json` and `Index.get` give), found exactly where `split` finds it."""

from __future__ import annotations

import datetime
import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from ctindex.providers import frontmatter as fm

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), inner, max_size=3),
    ),
    max_leaves=12,
)
_mappings = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), _values, min_size=1, max_size=5
)


@given(_mappings, st.sampled_from(["\n", "\r\n"]), st.sampled_from(["---", "..."]))
def test_a_dumped_mapping_reads_back_as_json(
    mapping: dict[str, object], newline: str, closing: str
) -> None:
    block = yaml.safe_dump(mapping, allow_unicode=True, sort_keys=False)
    text = "---" + newline + block.replace("\n", newline) + closing + newline + "body\n"
    got, why = fm.whole_mapping(text)
    assert why is None
    assert got == mapping
    assert json.loads(json.dumps(got)) == got
    _meta, body, warning = fm.split(text)
    assert (body, warning) == ("body\n", None)  # split cuts the same block


def test_dates_become_text_and_aliases_are_refused() -> None:
    got, why = fm.whole_mapping("---\nday: 2026-12-03\nat: 2026-12-03 10:00:00\n---\n")
    assert why is None
    assert got == {
        "day": datetime.date(2026, 12, 3).isoformat(),
        "at": datetime.datetime(2026, 12, 3, 10, 0).isoformat(),
    }
    bomb = "---\na: &x [1, 2]\nb: [*x, *x]\n---\nbody\n"
    assert fm.whole_mapping(bomb) == ({}, "frontmatter uses a YAML alias; not shown")


def test_where_split_warns_the_mapping_is_empty() -> None:
    for text in (
        "---\ntitle: x\nno closing line\n",
        "---\ntitle: [unclosed\n---\nbody\n",
        "---\n- a list\n---\n",
        "---\n" + "k: " + "v" * fm.MAX_FRONTMATTER_BYTES + "\n---\n",
        "no frontmatter\n",
        "---\nk: " + "[" * 40 + "]" * 40 + "\n---\n",  # nested deeper than MAX_DEPTH
    ):
        assert fm.whole_mapping(text) == ({}, None), text[:40]
