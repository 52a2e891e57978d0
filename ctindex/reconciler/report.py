"""Plain data objects describing one pass: what could not be seen, and how much work it took."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

SAMPLE_SIZE = 20


@dataclass
class Bucket:
    """A count of occurrences plus the first few keys, so nothing is dropped silently."""

    count: int = 0
    sample: list[str] = field(default_factory=list)

    def add(self, key: str) -> None:
        self.count += 1
        if len(self.sample) < SAMPLE_SIZE:
            self.sample.append(key)


@dataclass
class WalkReport:
    """Everything the walk could not see or did not trust.

    ``missing_roots``: a root that is absent, a symlink or not a folder; its
    previous entries are removed (they are gone) but callers should warn.
    ``vanished``: an entry listed but gone (ENOENT/ENOTDIR/ELOOP) before we stat/opened it.
    ``unreadable_dirs`` / ``unreadable_files``: EACCES/EPERM; previous entries kept.
    ``undecodable``: names that are not valid UTF-8 (kept, as surrogate escapes).
    ``too_deep``: folders below ``max_depth`` or with a path too long to open; previous
    entries kept.
    ``errors``: any other OSError, as ``key: message`` (previous entries kept).
    """

    missing_roots: Bucket = field(default_factory=Bucket)
    vanished: Bucket = field(default_factory=Bucket)
    unreadable_dirs: Bucket = field(default_factory=Bucket)
    unreadable_files: Bucket = field(default_factory=Bucket)
    undecodable: Bucket = field(default_factory=Bucket)
    too_deep: Bucket = field(default_factory=Bucket)
    errors: Bucket = field(default_factory=Bucket)

    def is_clean(self) -> bool:
        return all(getattr(self, f.name).count == 0 for f in fields(self))

    def as_dict(self) -> dict[str, dict[str, object]]:
        return asdict(self)


@dataclass
class PassMetrics:
    entries_visited: int = 0  # every folder entry listed (any kind)
    dirs_visited: int = 0  # folders listed
    files_hashed: int = 0  # files read in full (one count per successful read)
    bytes_hashed: int = 0
    duration_ms: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # per kind, see reconcile()

    def bump(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
