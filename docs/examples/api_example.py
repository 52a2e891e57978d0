"""A program using ctindex's typed API (docs/api.md).

`.ci/editable-typing` checks it with `mypy --strict` against the README's
editable install, from a folder outside the checkout, as a user's project
would: every name below must resolve to its real type, none to `Any`.
Run it: `python docs/examples/api_example.py fixtures/sample bitcoin`.
"""

from __future__ import annotations

import sys

import ctindex


def best_matches(project: str, query: str, limit: int = 5) -> list[tuple[str, list[str]]]:
    """(concept ID, matched words of its snippet) of the best hits."""
    with ctindex.Index(project) as index:
        result: ctindex.SearchResult = index.search(query, limit=limit)
        found: list[tuple[str, list[str]]] = []
        for hit in result.hits:
            words = [hit.snippet_text[start:end] for start, end in hit.snippet_matches]
            found.append((hit.id, words))
        return found


def describe(project: str, concept_id: str) -> str:
    with ctindex.Index(project) as index:
        try:
            concept: ctindex.Concept = index.get(concept_id)
        except ctindex.ConceptNotFound as missing:
            return f"{concept_id}: none; close: {', '.join(missing.suggestions)}"
        decision = index.why(concept.path)
        return f"{concept.title} ({concept.type or 'untyped'}), {decision.reason}"


def main(argv: list[str]) -> int:
    project, query = argv[1], " ".join(argv[2:])
    for concept_id, words in best_matches(project, query):
        print(f"{concept_id}: {', '.join(words)}")
        print(f"  {describe(project, concept_id)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
