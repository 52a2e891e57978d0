"""The index's term layout: what every provider's analysis fills in and the
matcher reads (docs/provider.md, docs/search.md "Ranking", docs/format.md).

Light on purpose: the matcher imports it on every query, and no provider's
parser or stemmer comes with it.
"""

from __future__ import annotations

# Field order and stored weights: a term in the title counts three times a
# body occurrence (tags and description twice) in its posting's tf; BM25F's
# own per-field weights are the matcher's (docs/search.md), which derives the
# body's raw count from this total and the per-field terms. Integers keep the
# weighted term frequencies exact (they are stored as u16 in segments).
FIELDS = ("title", "tags", "description", "body")
WEIGHTS = (3, 2, 2, 1)

# Separator between fields and between tags in the token stream: phrases never
# match across it. NUL can not occur inside a word token.
SEP = "\x00"
FACET_TYPE = "\x00type:"
FACET_TAG = "\x00tag:"
# Each word of the type, so `type:bigquery` finds `BigQuery Table` (docs/search.md).
FACET_TYPE_WORD = "\x00typew:"

# Ranking-only terms (docs/search.md, "Ranking"; docs/format.md). No query word
# can be one of them (a word has no control character), so they never change
# which documents match; the matcher reads them to score and order matches.
# Per field raw term frequencies for BM25F: `FIELD_TERM[f] + term`, for the
# title, tags, description and concept ID (the body's is derived from the
# weighted total, which stays the term's own posting).
FIELD_TERM = ("\x01t", "\x01g", "\x01d", "\x01i")
# Exact-match keys: the document's title terms in order, its concept ID's
# terms, its last ID segment's terms, and the title's distinct terms sorted
# (near-exact: same words, any order).
EXACT_TITLE = "\x02t"
EXACT_ID = "\x02i"
EXACT_LAST = "\x02l"
EXACT_TITLE_SET = "\x02s"
