"""Errors the user can cause: each carries one line the CLI prints as is.

These are the stable error types of the Python API (docs/api.md, "Errors")
as well: every class maps to an exit code (``exit_code``, docs/cli.md) and the CLI
catches ``CtindexError`` and never shows a traceback for these. They are
defined here, importing nothing, so both the query fast path and API users
can name them without loading the modules that raise them.

    CtindexError                 exit 2 unless a subclass says otherwise
    ├── PolicyError              malformed .ct/index.jsonc, unknown provider
    │   └── UneditableConfig     `scopes add/remove` cannot edit this config (policy/config_edit.py)
    ├── UsageError               an unusable argument (-C not a folder, no project)
    │   ├── QueryError           a malformed query
    │   │   └── UnknownField     a field name the query language does not have
    │   ├── AmbiguousConcept     an ID that names concepts in several scopes
    │   ├── UnsafeStorePath      a store folder is a symbolic link or another user's, or
    │   │                        a write into a project folder of another user
    │   └── WrongType            an API argument of the wrong type (also a TypeError)
    ├── IndexWriteError          writing the index failed
    │   ├── IndexBusy            another writer held the update lock too long
    │   │   ├── ShareHostWrites  a network share's host writes this index, and did not answer
    │   │   └── TornManifest     MANIFEST reads damaged through a mount (store/generation.py)
    │   ├── IndexReadOnly        the index folder cannot be written (store/lock.py)
    │   └── WriteFailed          one atomic write failed, and at which step (base/durable.py)
    ├── IndexCorrupt             the published index cannot be read consistently
    │   └── IndexFormatChanged   written in another storage format: rebuilt, not repaired
    ├── ConceptNotFound          exit 1: no concept has that ID (with close matches)
    ├── ConceptUnreadable        the concept's file is not a readable document
    ├── OutputError              exit 74: stdout cannot be written, broken pipe too (base/output.py)
    ├── MetricsWriteError        the --metrics-file cannot be written (audit/metrics.py)
    └── CannotVerify             `verify` has nothing it can check (commands/verify.py)

The subclasses defined elsewhere are defined where they are raised; this
tree is their one list. A class may add a built-in exception as a second
base (WrongType is a TypeError too); the tree shows its first.
"""

from __future__ import annotations


def shown(text: str) -> str:
    """`text` for a one-line message: characters that are not printable (a
    NUL, a newline, a surrogate that stands for an undecodable byte or for
    nothing) as Python escapes, so a message is one line, and encodable
    wherever it is written (a terminal, UTF-8 JSON, an MCP reply)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class CtindexError(Exception):
    """An expected failure with a one-line message naming the file/key/path at fault."""

    exit_code = 2

    def __str__(self) -> str:
        # The message quotes what the user wrote (a query, an ID, a path), which
        # may hold a newline or a carriage return: it is made one line here, once,
        # for every reader (the CLI's stderr line, JSON, MCP, the API).
        return shown(super().__str__())


class PolicyError(CtindexError):
    """The indexing policy cannot be honoured: malformed `.ct/index.jsonc`,
    an unknown provider, a bad pattern (exit 2)."""


class UsageError(CtindexError):
    """The command line names something unusable (e.g. ``-C`` is not a folder)."""


class QueryError(UsageError):
    """A malformed query (unterminated quote, a dangling OR, ...); the message
    names the column (docs/search.md)."""


class UnknownField(QueryError):
    """A ``name:value`` whose name is no field (docs/search.md, "Fields"):
    ``field`` is the name as written, ``suggestions`` the closest fields,
    best first (maybe none)."""

    def __init__(self, message: str, field: str, suggestions: tuple[str, ...]) -> None:
        super().__init__(message)
        self.field = field
        self.suggestions = suggestions


class UnsafeStorePath(UsageError):
    """A folder of the store path (`.ct`, `.ct/okf`, `.ct/okf/runtime`) is a
    symbolic link or another user's: nothing is read or written through it;
    or the project folder is another user's and the call would write the
    store or start a daemon there: nothing is made (ctindex/policy/store_path.py,
    docs/cli.md "Refused store folders")."""


class WrongType(UsageError, TypeError):
    """An argument of the Python API of a type it does not take, before
    anything is read (docs/api.md, "Errors"): ``search: query must be str,
    not bytes``. ``call`` is the method (``Index`` for the constructor),
    ``parameter`` the argument, ``expected`` the types it takes, as the
    message spells them, and ``got`` the type passed. A ``TypeError`` as
    well, the exception Python raises for a call of the wrong types, and a
    ``UsageError``, like every other bad argument."""

    def __init__(self, call: str, parameter: str, expected: str, got: type) -> None:
        got_name = "None" if got is type(None) else got.__qualname__
        super().__init__(f"{call}: {parameter} must be {expected}, not {got_name}")
        self.call = call
        self.parameter = parameter
        self.expected = expected
        self.got = got


class IndexWriteError(CtindexError):
    """Writing the index failed (exit 2)."""


class IndexBusy(IndexWriteError):
    """Another writer held the update lock longer than the caller would wait
    (a query then answers from the files instead: see ctindex/query/freshness.py)."""


class ShareHostWrites(IndexBusy):
    """The daemon on a network share's host serves this index (its heartbeat
    is fresh), so it is the index's one writer; it did not answer, or its
    answer cannot be read through this mount. This host writes nothing: a
    query answers from the files, `update` and `rebuild` stop (exit 2)
    (docs/network-shares.md, "One writer")."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"{why}; share host {host} writes this index, not this host")
        self.host = host
        self.why = why


class IndexCorrupt(CtindexError):
    """The published index can not be read consistently (after retries)."""


class IndexFormatChanged(IndexCorrupt):
    """The published index was written in another storage format
    (docs/format.md): not damaged, but rebuilt just the same before it is
    read; reported as an upgrade, not a repair."""


class ConceptNotFound(CtindexError):
    """No concept of the project has this ID (exit 1, like a search without a
    hit). ``suggestions`` holds the closest existing IDs, best first."""

    exit_code = 1

    def __init__(self, concept_id: str, suggestions: tuple[str, ...] = ()) -> None:
        from ctindex.base.suggest import did_you_mean

        super().__init__(f"{concept_id}: no such concept{did_you_mean(suggestions)}")
        self.concept_id = concept_id
        self.suggestions = suggestions
        # Set when the project has no scope at all (ctindex/service/no_scopes.py).
        self.no_scopes: dict[str, str] | None = None


class AmbiguousConcept(UsageError):
    """The ID names a concept in more than one scope: ``candidates`` are their
    project-relative paths; pass one of them (or the scope) instead."""

    def __init__(self, concept_id: str, candidates: tuple[str, ...]) -> None:
        super().__init__(
            f"{concept_id}: ambiguous concept ID, found in {len(candidates)} "
            f"scopes: {', '.join(candidates)} (name one by its path or scope)"
        )
        self.concept_id = concept_id
        self.candidates = candidates


class ConceptUnreadable(CtindexError):
    """The concept's file exists and is included, but is not a document the
    provider can read (not UTF-8, a NUL byte, changed while read)."""
