"""Snippets: a short window of the body around the matched words, marked.

Matched words are wrapped in « and » (docs/search.md): rare in Markdown, one
character each, and unambiguous in both text and JSON output.
"""

from __future__ import annotations

from collections.abc import Collection

from ctindex.providers import INDEX_PROVIDER, load

OPEN, CLOSE = "«", "»"
WINDOW_WORDS = 24  # words considered per candidate window
MAX_CHARS = 220


def _flat(text: str) -> str:
    return " ".join(text.split())


def make_snippet(
    body: str, description: str, terms: Collection[str], prefixes: tuple[str, ...] = ()
) -> str:
    """The best window of `body` (most distinct matched terms, earliest on a
    tie), falling back to the description, then to the start of the body.
    A word is marked when its term is one of `terms` or starts with one of
    `prefixes`."""
    for text in (body, description):
        spans = list(load(INDEX_PROVIDER).term_spans(text))
        marked = {t for _, _, t in spans if t in terms or (prefixes and t.startswith(prefixes))}
        hits = [i for i, (_, _, t) in enumerate(spans) if t in marked]
        if hits:
            return _window(text, spans, hits, marked)
    return _clip(_flat(description or body))


def _window(
    text: str, spans: list[tuple[int, int, str]], hits: list[int], terms: Collection[str]
) -> str:
    best = _best_start(spans, hits)
    first = max(best - 6, 0)
    last = min(best + WINDOW_WORDS, len(spans)) - 1
    start, end = spans[first][0], spans[last][1]
    out: list[str] = ["…" if first > 0 else ""]
    pos = start
    for i in range(first, last + 1):
        s, e, t = spans[i]
        if t in terms:
            out.append(text[pos:s])
            out.append(OPEN + text[s:e] + CLOSE)
            pos = e
    out.append(text[pos:end])
    out.append("…" if last < len(spans) - 1 else "")
    return _clip(_flat("".join(out)))


def _best_start(spans: list[tuple[int, int, str]], hits: list[int]) -> int:
    """The hit whose window of WINDOW_WORDS words holds the most distinct
    matched terms, the earliest on a tie. One sliding window over the
    (increasing) hits with a count per term: each hit enters and leaves it
    once, so a document with hundreds of thousands of hits costs linear time
    (re-collecting the window for every hit was quadratic)."""
    counts: dict[str, int] = {}
    best, best_score = hits[0], -1
    ahead = 0  # hits[:ahead] have entered the window
    for behind, h in enumerate(hits):
        while ahead < len(hits) and hits[ahead] < h + WINDOW_WORDS:
            term = spans[hits[ahead]][2]
            counts[term] = counts.get(term, 0) + 1
            ahead += 1
        if len(counts) > best_score:
            best, best_score = h, len(counts)
        term = spans[hits[behind]][2]  # h leaves before the next window
        if counts[term] == 1:
            del counts[term]
        else:
            counts[term] -= 1
    return best


def _clip(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    cut = text.rfind(" ", 0, MAX_CHARS)
    return text[: cut if cut > 0 else MAX_CHARS] + "…"
