"""CI mode: inside a CI job a search never starts a daemon by itself.

Every CI service sets `CI` (GitHub Actions, GitLab CI, CircleCI, Travis,
Buildkite, Azure Pipelines, Jenkins via plugins). A daemon started lazily by
a search there would outlive the job by `idle_seconds` (an hour by default),
holding the runner's memory and inotify watches for nothing: the job ends
long before a second query could profit. So when `CI` is set (to anything
but an empty string, `0`, `false` or `no`), a search that finds no daemon
reconciles synchronously (freshness `fallback`, reason `CI_REASON`) and
starts none. A daemon that is already running (`ctindex watch start`, which
always works) is still used. `CTINDEX_WATCH=1` forces the lazy start back on.

Standard library only: imported by the query path.
"""

from __future__ import annotations

import os

CI_REASON = "CI: no daemon started (CI is set; CTINDEX_WATCH=1 starts one)"
_OFF = ("", "0", "false", "no")


def spawn_blocked() -> str | None:
    """The freshness reason when a search must not start a daemon, else None."""
    if os.environ.get("CTINDEX_WATCH", "").strip().lower() in ("1", "true", "yes", "force"):
        return None
    ci = os.environ.get("CI")
    if ci is None or ci.strip().lower() in _OFF:
        return None
    return CI_REASON
