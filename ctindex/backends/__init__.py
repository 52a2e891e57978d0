"""Watcher backends: one narrow interface (backends.base), one thin module per
native facility (inotify, fsevents, rdcw), the poll lane, and open_watcher()
that picks among them. Never imports ctindex or reconciler.

The names load on first use (module ``__getattr__``): a search imports
ctindex/backends/remote.py on every run, and must not pay for the watchers.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not `typing`'s: a search does not import typing
if TYPE_CHECKING:
    from ctindex.backends.base import Batch, Watcher
    from ctindex.backends.choose import open_watcher

__all__ = ["Batch", "Watcher", "open_watcher"]
_HOME = {
    "Batch": "ctindex.backends.base",
    "Watcher": "ctindex.backends.base",
    "open_watcher": "ctindex.backends.choose",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ctindex.backends' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
