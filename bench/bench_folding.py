"""Benchmark: what accent folding costs the tokenizer (docs/benchmarks.md,
"Folding").

In process, on ~40k small generated documents held in memory (the shape of
bench/bench_index.py's corpus: Zipf words, `key: value` frontmatter), the
time to analyse them all (`analyze_many`: parse the fields into terms with
the word cache, then assemble the counts) with the native core and forced
pure, in two texts:

* `ascii` — as bench_index.py writes it (ASCII only: folding is a flag check);
* `accented` — the same with one word in eight given accents (`é`, `ñ`,
  `ü`, decomposed `e` + U+0301) and one document in four an `ﬁ` ligature,
  so most fields are non-ASCII and are folded.

Run it with the `ctindex` to measure first on `PYTHONPATH` (an older tree's
install) and then this tree's, to compare before and after; it imports
nothing else of the repository. Prints one JSON object: CPU times in ms
(process time, so other load on a shared machine counts less), the first
run with an empty word cache and the median of the next RUNS.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time

from bench.bench_index import SYLLABLES

DOCS = 40_000
RUNS = 3
ACCENTS = {"a": "á", "e": "é", "o": "ö", "n": "ñ", "u": "ü", "i": "i\u0301"}


def corpus(accented: bool) -> list[tuple[str, bytes]]:
    rng = random.Random(20261203)
    vocab = list(
        dict.fromkeys(
            "".join(rng.choices(SYLLABLES, k=rng.choice((1, 2, 2, 3, 3, 4)))) for _ in range(60_000)
        )
    )
    cum = []
    total = 0.0
    for r in range(len(vocab)):
        total += 1.0 / (r + 1) ** 1.07
        cum.append(total)
    out = []
    for i in range(DOCS):
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(12, 50))
        if accented:
            words = [
                "".join(ACCENTS.get(c, c) for c in w) if rng.random() < 0.125 else w for w in words
            ]
            if i % 4 == 0:
                words.append("ﬁle")
        title = " ".join(words[:3]).title()
        text = (
            f"---\ntitle: {title}\ntype: Metric\ndescription: {' '.join(words[:8])}\n"
            f"tags: [{words[3]}, {words[4]}]\n---\n\n# {title}\n\n{' '.join(words)}.\n"
        )
        out.append((f"kb/d{i // 100:03d}/doc{i:05d}.md", text.encode()))
    return out


def measure(pure: bool, files: list[tuple[str, bytes]]) -> dict[str, float]:
    os.environ["CTINDEX_PURE"] = "1" if pure else "0"
    from ctindex.base import native_modules
    from ctindex.providers import okf_markdown as okf

    native_modules.reset()
    docs = [okf.parse(key, data, "kb") for key, data in files]
    okf._CACHE.clear()
    start = time.process_time()
    list(okf.analyze_many(docs))  # type: ignore[arg-type]
    cold = (time.process_time() - start) * 1000
    warm = []
    for _ in range(RUNS):
        start = time.process_time()
        list(okf.analyze_many(docs))  # type: ignore[arg-type]
        warm.append((time.process_time() - start) * 1000)
    return {"cold_ms": round(cold, 1), "warm_median_ms": round(statistics.median(warm), 1)}


def main() -> None:
    import ctindex.providers.okf_markdown as okf

    result: dict[str, object] = {"ctindex": okf.__file__}
    for text in ("ascii", "accented"):
        files = corpus(text == "accented")
        for pure in (False, True):
            result[f"{text} {'pure' if pure else 'native'}"] = measure(pure, files)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
