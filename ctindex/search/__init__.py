"""Query language, BM25 ranking, snippets and the --direct oracle."""
