"""The snippet window's optional C twin (ctindex/search/_snippet.c), typed.

``module()`` is None when it is not built or ``CTINDEX_PURE=1``
(ctindex/base/native_modules.py); ctindex/search/snippet.py then runs its
pure functions, which the C one matches character for character.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, cast

from ctindex.base import native_modules

# (core, spans of the matched words in it, words before the window, words after it)
Window = tuple[str, list[tuple[int, int]], bool, bool]


class SnippetModule(Protocol):
    def window(
        self,
        piece: str,
        stems: dict[str, str],
        marked: Collection[str],
        prefixes: tuple[str, ...],
        window_words: int,
        back: int,
        /,
    ) -> Window | None: ...


def module() -> SnippetModule | None:
    return cast("SnippetModule | None", native_modules.load("ctindex.search._snippet"))
