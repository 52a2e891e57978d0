"""ctindex: a persistent full-text index of OKF concept documents that is
never silently stale.

The Python API (docs/api.md)::

    import ctindex

    with ctindex.Index("path/to/project") as index:
        result = index.search("gross margin", limit=5)
        concept = index.get("tables/transactions")

Everything is imported on first use (module ``__getattr__``), so
``import ctindex`` costs nothing a command does not need: every `ctindex`
process imports this package first.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing `typing` (~2 ms of every `ctindex`
# process, ctindex/fast_entry.py); type checkers treat the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ctindex.api import (
        Concept,
        ConceptPage,
        ConceptSummary,
        Freshness,
        Hit,
        Index,
        Link,
        ScopeList,
        ScopeSummary,
        SearchResult,
        Status,
        Timings,
        UpdateReport,
    )
    from ctindex.errors import (
        AmbiguousConcept,
        ConceptNotFound,
        ConceptUnreadable,
        CtindexError,
        IndexBusy,
        IndexCorrupt,
        IndexWriteError,
        PolicyError,
        QueryError,
        ShareHostWrites,
        UnknownField,
        UnsafeStorePath,
        UsageError,
        WrongType,
    )
    from ctindex.policy.decide import Decision

_API = (
    "Concept",
    "ConceptPage",
    "ConceptSummary",
    "Freshness",
    "Hit",
    "Index",
    "Link",
    "ScopeList",
    "ScopeSummary",
    "SearchResult",
    "Status",
    "Timings",
    "UpdateReport",
)
_ERRORS = (
    "AmbiguousConcept",
    "ConceptNotFound",
    "ConceptUnreadable",
    "CtindexError",
    "IndexBusy",
    "IndexCorrupt",
    "IndexWriteError",
    "PolicyError",
    "QueryError",
    "ShareHostWrites",
    "UnknownField",
    "UnsafeStorePath",
    "UsageError",
    "WrongType",
)
_WHERE = {
    **dict.fromkeys(_API, "ctindex.api"),
    **dict.fromkeys(_ERRORS, "ctindex.errors"),
    "Decision": "ctindex.policy.decide",
}

__all__ = [
    "AmbiguousConcept",
    "Concept",
    "ConceptNotFound",
    "ConceptPage",
    "ConceptSummary",
    "ConceptUnreadable",
    "CtindexError",
    "Decision",
    "Freshness",
    "Hit",
    "Index",
    "IndexBusy",
    "IndexCorrupt",
    "IndexWriteError",
    "Link",
    "PolicyError",
    "QueryError",
    "ScopeList",
    "ScopeSummary",
    "SearchResult",
    "ShareHostWrites",
    "Status",
    "Timings",
    "UnknownField",
    "UnsafeStorePath",
    "UpdateReport",
    "UsageError",
    "WrongType",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value
    if name == "__version__":
        from ctindex.service.version import version

        return version()
    raise AttributeError(f"module 'ctindex' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
