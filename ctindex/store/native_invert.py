"""The segment builder's optional C twin (ctindex/store/_invert.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/base/native_modules.py); ctindex/store/segment_build.py then runs
invert.py's `PyInverter`, which the C `Inverter` matches byte for byte.
"""

from __future__ import annotations

from typing import Protocol, cast

from ctindex.base import native_modules


class Inverter(Protocol):
    """A segment's postings and token streams, fed one document at a time
    (invert.PyInverter is the specification)."""

    def add(self, tfw: dict[str, int], tokens: list[str]) -> None: ...
    def postings(self, docs32: bool) -> tuple[list[str], bytes, bytes]: ...
    def streams(self, word_base: int, seq32: bool) -> tuple[bytes, bytes, bytes]: ...


class InvertModule(Protocol):
    def Inverter(self, sep: str) -> Inverter: ...  # the C type, called to make one
    def crc32(self, data: bytes) -> int: ...
    def record(self, doc: tuple[object, ...]) -> bytes | None: ...


def module() -> InvertModule | None:
    return cast("InvertModule | None", native_modules.load("ctindex.store._invert"))
