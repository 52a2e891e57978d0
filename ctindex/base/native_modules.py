"""The optional C modules of the index engine, loaded when built, else None.

Four small extensions sit beside the pure-Python code they speed up:
ctindex/store/_invert.c (segment building), ctindex/providers/_words.c
(the okf-markdown word tokenizer and field counting),
ctindex/search/_rank.c (a query's scoring loops) and
ctindex/search/_snippet.c (a shown result's snippet window). Each pure function
is the specification its C twin matches byte for byte
(docs/decisions/native.md). Same rule as the reconciler's scan
(ctindex/reconciler/native.py): ``CTINDEX_PURE=1`` forces the pure path, and a module
that was not built or does not import is silently absent, since an install
without a compiler is a supported install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ctindex.reconciler.native import pure_forced

_loaded: dict[str, ModuleType | None] = {}


def load(name: str) -> ModuleType | None:
    """The extension module `name`, or None (pure path). Decided once per process."""
    if name not in _loaded:
        _loaded[name] = _load(name)
    return _loaded[name]


def _load(name: str) -> ModuleType | None:
    if pure_forced():
        return None
    try:
        return importlib.import_module(name)
    except Exception:  # not built, wrong ABI, a broken file: the pure path serves
        return None


def reset() -> None:
    """Decide again on the next load() (tests flip CTINDEX_PURE)."""
    _loaded.clear()
