"""Short version of `nox -s soak` (docs/reliability.md, "Soak"): ~120 random
file operations, every operation kind of tests/soak_harness.py at least once
(tar/rsync releases with fixed mtimes, same-stamp config swaps, hard links,
bind mounts, huge documents included), daemon kills/stops, damaged runtime
and index files, concurrent writers; marker-word answers checked against the
independent oracle tests/oracle.py, one query per check against `--direct`,
and freshness checked for truthfulness.

The seed is random per run and printed; replay a failure with
CTINDEX_SOAK_SEED=<seed> (or `python -m tests.soak_harness --seed <seed>`)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.soak_harness import Soak, run_soak

OPS = 120


@pytest.mark.slow
def test_robust_soak_short(tmp_path: Path) -> None:
    seed = int(os.environ.get("CTINDEX_SOAK_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"soak seed {seed} (replay: CTINDEX_SOAK_SEED={seed})")
    # No 20k-file overflow here (it costs seconds); `nox -s soak` does them.
    figures = run_soak(tmp_path / "project", OPS, seed, overflow_files=0, check_every=3)
    assert figures.file_operations == OPS
    # The tour runs every kind once before the random part (a kind that
    # finds nothing to act on falls back to a related one, so count the
    # kinds that ran, not each one's figure).
    assert len(figures.operations) >= len(Soak.FILE_OPS) - 2, figures.operations
    assert figures.oracle_queries >= 2 * figures.checks > 0
    assert figures.divergences == 0
