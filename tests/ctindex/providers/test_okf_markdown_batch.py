"""`analyze_many` (the rebuild's batched stemming) gives exactly `analyze`'s result."""

from __future__ import annotations

import pytest

from ctindex.providers import okf_markdown as okf


def _docs() -> list[okf.Document]:
    out = []
    for i in range(40):
        text = (
            f"---\ntitle: Title{i} Running\ntags: [tag{i % 3}, Shared Tag]\n"
            f"description: words{i} jumping\n---\nbody{i} body{i + 1} caf\u00e9 naïve_x "
            f"Connections connected {'x' * (i % 5)}\n"
        ).encode()
        got = okf.parse(f"kb/d{i}.md", text, "kb")
        assert isinstance(got, okf.Document)
        out.append(got)
    return out


@pytest.mark.parametrize("limit", [1_000_000, 7])  # 7: the cache is cleared mid-batch
def test_analyze_many_equals_analyze(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    docs = _docs()
    monkeypatch.setattr(okf, "_CACHE", {})
    monkeypatch.setattr(okf, "_CACHE_LIMIT", limit)
    monkeypatch.setattr(okf, "ANALYZE_BATCH", 16)
    batched = list(okf.analyze_many(docs))
    okf._CACHE.clear()
    single = [okf.analyze(d) for d in docs]
    assert batched == single
    assert "run" in batched[0].tfw and batched[0].tfw["run"] == 3  # title weight
