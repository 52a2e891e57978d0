"""The backends' one question to the simulated-platform switch
(docs/decisions/portability.md): is there a Linux mount table?

ctindex/backends/ may not import the reconciler, so this reads ``CTINDEX_SIMULATE``
itself, the same way ctindex/reconciler/platform_features.py does (the list of
names lives there; only ``no-mountinfo`` concerns this room).
"""

from __future__ import annotations

import os

SIMULATE_ENV = "CTINDEX_SIMULATE"
MOUNTINFO = "/proc/self/mountinfo"


def has_mountinfo() -> bool:
    hidden = {w.strip() for w in os.environ.get(SIMULATE_ENV, "").split(",")}
    return "no-mountinfo" not in hidden and os.path.exists(MOUNTINFO)
