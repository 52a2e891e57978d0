"""Close matches for a mistyped name: commands, options, choices, config
keys and concept IDs share this one rule: the standard library's difflib
similarity ratio, which argparse's own `suggest_on_error` uses from Python
3.14 on (the project supports 3.10, so it cannot rely on argparse for it).

Imports nothing at module level: a search process must not pay for difflib
unless a name was mistyped.
"""

from __future__ import annotations

from collections.abc import Iterable

CUTOFF = 0.6  # difflib's default similarity ratio
MOST = 3  # suggestions named at most


def close_matches(
    word: str, known: Iterable[str], n: int = MOST, cutoff: float = CUTOFF
) -> list[str]:
    """The names of `known` closest to `word` (similarity ratio at least
    `cutoff`), best first; none may be close."""
    import difflib

    return difflib.get_close_matches(word, list(known), n=n, cutoff=cutoff)


def did_you_mean(suggestions: Iterable[str], quote: bool = False) -> str:
    """'; did you mean a, b?' for the message tail, or '' when there is none."""
    names = [repr(s) if quote else s for s in suggestions]
    return f"; did you mean {', '.join(names)}?" if names else ""
