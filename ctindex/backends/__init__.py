"""Watcher backends: one narrow interface (backends.base), one thin module per
native facility (inotify, fsevents, rdcw), the poll lane, and open_watcher()
that picks among them. Never imports ctindex or reconciler."""

from ctindex.backends.base import Batch, Watcher
from ctindex.backends.choose import open_watcher

__all__ = ["Batch", "Watcher", "open_watcher"]
