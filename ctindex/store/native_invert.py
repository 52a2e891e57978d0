"""The segment builder's optional C twin (ctindex/store/_invert.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/native_modules.py); ctindex/store/segment.py then runs
`_invert_py` and `_streams_py`, which the C functions match byte for byte.
"""

from __future__ import annotations

from typing import Protocol, cast

from ctindex import native_modules


class InvertModule(Protocol):
    def invert(
        self, tfws: list[dict[str, int]], docs32: bool
    ) -> tuple[list[str], bytes, bytes]: ...
    def streams(
        self, token_lists: list[list[str]], terms: list[str], sep: str, seq32: bool
    ) -> tuple[bytes, bytes, bytes]: ...
    def crc32(self, data: bytes) -> int: ...


def module() -> InvertModule | None:
    return cast("InvertModule | None", native_modules.load("ctindex.store._invert"))
