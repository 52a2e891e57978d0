"""Documents from captured bytes: parse, analyse, and add them to a store
write (write side; the transaction around it is ctindex/indexing/transaction.py).

Each key is parsed by the provider of the scope that decided it, looked up
by id in the registry (ctindex/providers/__init__.py). Large batches are
cut into parts that fit the build budget (ctindex/store/budget.py) and written
as one segment per part, by forked workers where the platform ends them
with their parent: the file contents are shared with the children, not
pickled.

The bytes come either captured by the pass (`contents`: an update's reads,
which decided its renames and changes) or still to read (`Reads`: a
rebuild's pass deferred them, ctindex/reconciler/capture.py), in which case each
worker reads the files of its own key range, so reading and hashing run in
parallel too, and sends back what it read (fingerprint, digest), not the
bytes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

from ctindex import providers
from ctindex.base.output import Progress
from ctindex.providers.base import Analysis, Document, Feed, ProviderError
from ctindex.providers.fields import SEP
from ctindex.reconciler.capture import Captured, KeyReader, Shipment, ShipmentBuilder
from ctindex.reconciler.hashing import Outcome
from ctindex.reconciler.pending import PendingReads
from ctindex.store.budget import BuildBudget
from ctindex.store.segment import StoredDoc
from ctindex.store.segment_build import BuildInput

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan
    from ctindex.store.segment_build import SegmentInfo
    from ctindex.store.writer import StoreWriter

MAX_MESSAGE = 300  # characters kept of one provider error / warning
PARALLEL_MIN_DOCS = 4000  # below this, forking costs more than it saves
MAX_WORKERS = 4
# A worker parses and analyses this many documents, or this many bytes of
# them, before adding them to its segment: a provider's batch (its new words
# stemmed in one call). The bytes bound it for large documents, whose token
# lists cost about 2 bytes more per byte of text while a batch is analysed
# (docs/decisions/build-memory.md); 512 small pages are far below it.
BATCH_DOCS = 512
BATCH_BYTES = 1 << 20


class Target(NamedTuple):
    """Where a key's document comes from: its scope root and that scope's provider."""

    root: str
    provider: str


class Diagnostics(NamedTuple):
    """Provider errors (files not indexed) and warnings (indexed), by key."""

    errors: dict[str, str]
    warnings: dict[str, str]


class _Part(NamedTuple):
    """One part's segment: its file name, the keys it holds, and where the
    first of them is in the pass's sorted keys."""

    name: str
    keys: list[str]
    start: int


class Reads(NamedTuple):
    """Files still to read, under the folder `base`, sorted by key."""

    base: str
    pending: PendingReads


class Added(NamedTuple):
    diagnostics: Diagnostics
    shipments: list[Shipment]  # the read outcomes of a Reads source's keys, else empty


class _Built(NamedTuple):
    name: str
    info: SegmentInfo
    diagnostics: Diagnostics
    shipment: Shipment


class _Source:
    """The bytes of each key: from the captured contents, or read now with
    a KeyReader (the outcome of each read kept for `shipment`)."""

    def __init__(self, source: Mapping[str, bytes] | Reads) -> None:
        self.contents = source if not isinstance(source, Reads) else None
        self.reads = source if isinstance(source, Reads) else None
        self.reader = KeyReader(self.reads.base) if self.reads is not None else None
        self.outcomes = ShipmentBuilder()

    def data(self, key: str, at: int) -> bytes | None:
        """The bytes of `key`, the `at`-th of the pass's sorted keys."""
        if self.contents is not None:
            return self.contents[key]
        assert self.reads is not None and self.reader is not None
        got = self.reader.read(self.reads.pending[at])
        self.outcomes.add(Captured.of(key, got))
        return got.data if got.outcome is Outcome.OK else None

    def batch(self, keys: Sequence[str], start: int) -> list[bytes | None]:
        """`data` of each of `keys` (sorted, from the `start`-th of the
        pass's keys on): a folder's files read at once."""
        if self.contents is not None:
            return [self.contents[key] for key in keys]
        assert self.reads is not None and self.reader is not None
        pending = self.reads.pending
        return self.reader.read_keys(
            [pending[i] for i in range(start, start + len(keys))], self.outcomes
        )

    def shipment(self) -> Shipment:
        return self.outcomes.shipment()

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def clip(message: str) -> str:
    """Bound a diagnostic kept in the index (a YAML error can quote a long line)."""
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def targets_of(plan: Plan, keys: Sequence[str]) -> dict[str, Target]:
    """The target of each key. A key that is not itself a scope root is in
    the scope of its folder's other such keys (`key_under` of a root that
    is not the key itself only looks at the key's folder), so each folder
    is looked up once."""
    roots = {s.root for s in plan.scopes}
    by_folder: dict[str, Target] = {}
    out: dict[str, Target] = {}
    for key in keys:
        if key in roots:
            out[key] = _target(plan, key)
            continue
        folder = key.rpartition("/")[0]
        got = by_folder.get(folder)
        if got is None:
            got = by_folder[folder] = _target(plan, key)
        out[key] = got
    return out


def _target(plan: Plan, key: str) -> Target:
    found = plan.find_scope(key)
    scope = found[0] if found else None
    return Target(scope.root, scope.provider) if scope else Target("", providers.INDEX_PROVIDER)


def stored_doc(doc: Document) -> StoredDoc:
    """What a segment keeps of a document besides its postings."""
    return StoredDoc(
        doc.key,
        doc.concept_id,
        doc.scope,
        doc.title,
        doc.type,
        doc.description,
        doc.tags,
        doc.body,
        doc.size,
    )


def build_input(doc: Document, analysis: Analysis | None = None) -> BuildInput:
    """A document and its analysis as the store writes them (without an
    analysis: the index provider's)."""
    a = providers.load(providers.INDEX_PROVIDER).analyze(doc) if analysis is None else analysis
    return BuildInput(stored_doc(doc), a.tokens, a.tfw, a.length, a.flens)


def reanalyze(stored: StoredDoc, provider_id: str = providers.INDEX_PROVIDER) -> BuildInput:
    """A stored document analysed again (a merge rewrites it into a new segment)."""
    doc = Document(
        key=stored.key,
        concept_id=stored.concept_id,
        scope=stored.scope,
        title=stored.title,
        type=stored.type,
        description=stored.description,
        tags=stored.tags,
        body=stored.body,
        size=stored.size,
    )
    return build_input(doc, providers.load(provider_id).analyze(doc))


def reanalyzer(plan: Plan) -> Callable[[StoredDoc], BuildInput]:
    """`reanalyze` with the provider of each document's scope under `plan`."""

    def again(stored: StoredDoc) -> BuildInput:
        return reanalyze(stored, targets_of(plan, [stored.key])[stored.key].provider)

    return again


def add_documents(
    writer: StoreWriter,
    keys: list[str],
    source: Mapping[str, bytes] | Reads,
    plan: Plan,
    index_dir: Path,
    progress: TextIO | None,
    budget: BuildBudget | None = None,
) -> Added:
    """Parse and analyse `keys` (sorted) and add them to `writer`, each by
    the provider of its scope under `plan`: in this process, or one segment
    per part of the build budget (ctindex/store/budget.py), the parts built by
    forked workers where the platform allows. `source`: their captured
    bytes, or the reads still to make, of these very keys (each key's
    outcome is then in `Added.shipments`, for
    ctindex/reconciler/capture.py complete())."""
    if isinstance(source, Reads) and len(source.pending) != len(keys):
        raise ValueError("add_documents: the keys are not those of the reads")
    workers = _workers(len(keys))
    budget = (budget or BuildBudget()).with_builders(workers)
    even = -(-len(keys) // workers)  # every worker gets a part, at least
    sized = ((key, _size(source, key, at)) for at, key in enumerate(keys))
    parts = list(budget.parts(sized, max_docs=even))
    if workers > 1 or len(parts) > 1:
        out = Added(Diagnostics({}, {}), [])
        for built in _build_parts(
            parts, source, plan, index_dir, writer.generation, workers, progress
        ):
            writer.adopt(built.name, built.info)
            out.diagnostics.errors.update(built.diagnostics.errors)
            out.diagnostics.warnings.update(built.diagnostics.warnings)
            out.shipments.append(built.shipment)
        return out
    diagnostics = Diagnostics({}, {})
    bar = Progress(progress, "indexing")
    src = _Source(source)
    targets = targets_of(plan, keys)
    try:
        for n, key in enumerate(keys, 1):
            target = targets[key]
            provider = providers.load(target.provider)
            data = src.data(key, n - 1)
            doc = None if data is None else _parsed(key, data, target, diagnostics)
            if doc is not None:
                writer.add(build_input(doc, provider.analyze(doc)))
            bar(n, len(keys))
    finally:
        src.close()
    bar.done()
    return Added(diagnostics, [src.shipment()] if src.reads is not None else [])


def _size(source: Mapping[str, bytes] | Reads, key: str, at: int) -> int:
    """The bytes of `key`'s file, the `at`-th of the pass's sorted keys:
    read already, or as the walk saw it."""
    return source.pending.size(at) if isinstance(source, Reads) else len(source[key])


def _parsed(key: str, data: bytes, target: Target, diagnostics: Diagnostics) -> Document | None:
    got = providers.load(target.provider).parse(key, data, target.root)
    if isinstance(got, ProviderError):
        diagnostics.errors[key] = clip(got.message)
        return None
    if got.warning:
        diagnostics.warnings[key] = clip(got.warning)
    return got


# -- parallel indexing (large batches) -------------------------------------------------


class _Job(NamedTuple):
    """What a forked worker inherits (never pickled)."""

    source: Mapping[str, bytes] | Reads
    plan: Plan
    index_dir: Path
    parent: int  # pid of the process that forked the workers


_JOB: _Job | None = None


def _workers(docs: int) -> int:
    """How many processes to parse and build segments with (1 = in process)."""
    import multiprocessing

    from ctindex.reconciler.platform_features import has_prctl

    # Forked workers only where the kernel ends them with their parent
    # (prctl PR_SET_PDEATHSIG, _worker_init): elsewhere a killed rebuild would
    # leave them running (docs/decisions/portability.md).
    if (
        docs < PARALLEL_MIN_DOCS
        or not has_prctl()
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS, docs // (PARALLEL_MIN_DOCS // 2)))


def _build_parts(
    parts: list[list[str]],
    source: Mapping[str, bytes] | Reads,
    plan: Plan,
    index_dir: Path,
    generation: int,
    workers: int,
    progress: TextIO | None,
) -> list[_Built]:
    """Parse, analyse and write one segment per part (consecutive key
    ranges, so each segment holds a contiguous run of keys): by `workers`
    forked processes, or one after another in this one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from ctindex.errors import IndexWriteError
    from ctindex.store.durable import unique_name

    global _JOB
    starts = itertools.accumulate(map(len, parts), initial=0)  # one more than parts
    jobs = [
        _Part(unique_name("seg", generation, ".seg"), keys, at)
        for keys, at in zip(parts, starts, strict=False)
    ]
    total = sum(map(len, parts))
    bar = Progress(progress, f"indexing ({workers} processes)" if workers > 1 else "indexing")
    bar(0, total)
    _JOB = _Job(source, plan, index_dir, os.getpid())
    out: list[_Built] = []
    try:
        if workers == 1:
            for job in jobs:
                out.append(_build_part(job))
                bar(sum(len(p.keys) for p in jobs[: len(out)]), total)
            return out
        with ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init
        ) as pool:
            for job, got in zip(jobs, pool.map(_build_part, jobs), strict=True):
                out.append(_own_keys(got, job.keys))
                bar(sum(len(p.keys) for p in jobs[: len(out)]), total)
    except BrokenProcessPool as exc:
        raise IndexWriteError(
            f"{index_dir}: an indexing process died; nothing was published"
        ) from exc
    finally:
        _JOB = None
        bar.done()
    return out


def _own_keys(built: _Built, keys: list[str]) -> _Built:
    """`built` with the keys of its shipment (read back from a worker: new
    strings) replaced by this process's own strings of them, its part's
    `keys` (the shipment's are some of them, in order): one copy of every
    key instead of two until the pass ends."""
    shipped = built.shipment.keys
    own: list[str] = []
    it = iter(keys)
    for key in shipped:
        for mine in it:
            if mine == key:
                own.append(mine)
                break
    if len(own) != len(shipped):  # not a subsequence: keep what was sent
        return built
    return built._replace(shipment=built.shipment._replace(keys=own))


def _worker_init() -> None:
    """A worker must never outlive or out-lock its parent: it drops the
    inherited update-lock descriptor and asks the kernel to kill it when the
    parent dies (Linux PR_SET_PDEATHSIG), e.g. after a SIGKILL mid-rebuild.

    It also runs without the cyclic GC: it builds one segment and exits, makes
    no garbage cycles worth collecting, and every collection would walk (and
    copy-on-write touch) the objects inherited from the parent and the
    millions of postings it allocates."""
    import ctypes
    import gc
    import signal

    gc.disable()
    from ctindex.reconciler.platform_features import has_prctl
    from ctindex.store.lock import release_inherited

    release_inherited()
    if has_prctl():  # Linux; elsewhere the parent-alive check below is the guard
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    assert _JOB is not None
    if os.getppid() != _JOB.parent:  # the parent died before prctl took effect
        os._exit(1)


def _build_part(part: _Part) -> _Built:
    """One part's segment. Its documents are read, parsed and analysed a
    batch at a time and streamed into the segment builder, which keeps only
    their term ids and compressed records: holding a whole part's
    documents, dicts and token lists until the end cost ~110 MiB more per
    20,000 documents (docs/decisions/native.md)."""
    from ctindex.store.segment_build import SegmentBuilder

    assert _JOB is not None
    job = _JOB
    diagnostics = Diagnostics({}, {})
    builder = SegmentBuilder(SEP)
    src = _Source(job.source)  # a worker reads with its own descriptors
    targets = targets_of(job.plan, part.keys)
    try:
        for start, end in _batches(part, job.source):
            docs: list[tuple[str, Document]] = []
            keys = part.keys[start:end]
            for key, data in zip(keys, src.batch(keys, part.start + start), strict=True):
                doc = None if data is None else _parsed(key, data, targets[key], diagnostics)
                if doc is not None:
                    docs.append((targets[key].provider, doc))
            for doc, feed in _fed(docs):
                builder.add_fed(stored_doc(doc), feed)
    finally:
        src.close()
    info = builder.finish(job.index_dir / part.name, fault_point="mid-segment")
    return _Built(part.name, info, diagnostics, src.shipment())


def _batches(part: _Part, source: Mapping[str, bytes] | Reads) -> Iterator[tuple[int, int]]:
    """[start, end) of each batch of `part.keys`: at most BATCH_DOCS keys
    and, past its first key, at most BATCH_BYTES of their files."""
    start = 0
    while start < len(part.keys):
        end, size = start, 0
        while end < len(part.keys) and end - start < BATCH_DOCS:
            add = _size(source, part.keys[end], part.start + end)
            if end > start and size + add > BATCH_BYTES:
                break
            size += add
            end += 1
        yield start, end
        start = end


def _fed(docs: list[tuple[str, Document]]) -> Iterator[tuple[Document, Feed]]:
    """Each document and its feed, in order; each run of one provider's
    documents is analysed as a batch (`Provider.feed_many`)."""
    start = 0
    while start < len(docs):
        provider_id = docs[start][0]
        end = start
        while end < len(docs) and docs[end][0] == provider_id:
            end += 1
        run = [doc for _, doc in docs[start:end]]
        yield from zip(run, providers.load(provider_id).feed_many(run), strict=True)
        start = end
