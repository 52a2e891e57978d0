"""Issue 6 §1, short version of `nox -s soak`: ~60 random steps (file
operations, daemon kills/stops, damaged runtime and index files, concurrent
writers), each checked against `--direct` and for truthful freshness.

The seed is random per run and printed; replay a failure with
CTINDEX_SOAK_SEED=<seed> (or `python -m tests.soak_harness --seed <seed>`)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.soak_harness import run_soak

STEPS = 60


def test_robust_soak_short(tmp_path: Path) -> None:
    seed = int(os.environ.get("CTINDEX_SOAK_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"soak seed {seed} (replay: CTINDEX_SOAK_SEED={seed})")
    # No 20k-file overflow here (it costs seconds); `nox -s soak` does them.
    figures = run_soak(tmp_path / "project", STEPS, seed, overflow_files=0)
    assert figures.steps == STEPS
    assert figures.queries == 4 * STEPS
    assert figures.divergences == 0
