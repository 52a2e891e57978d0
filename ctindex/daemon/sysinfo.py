"""Process facts for status and the memory ceiling (psutil), and handing the
indexer's transient memory back to the OS."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Container
from pathlib import Path


def rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


@functools.cache  # constant for the process's life; status asks every heartbeat
def physical_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil can fail in odd containers; the figure is informational
        return None


def release_memory() -> None:
    """Reference cycles keep a pass's tables alive until the collector runs,
    and glibc keeps freed heap pages; RSS is what the memory ceiling and the
    per-file figure measure, so both are released after each batch of work."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: gc alone still helps
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def classify(keys: list[str], root: Path, known: Container[str] | None) -> dict[str, int]:
    """Pending add/change/remove counts: gone -> remove; present and in the
    published file table (`known`, None when unknown) -> change; else add.
    A folder key counts once."""
    counts = {"add": 0, "change": 0, "remove": 0}
    for key in keys:
        if not os.path.lexists(os.path.join(root, key)):
            counts["remove"] += 1
        elif known is None or key in known:
            counts["change"] += 1
        else:
            counts["add"] += 1
    return counts


def where(exc: BaseException) -> str:
    """file:line of the innermost frame (exceptional-exit log detail)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
