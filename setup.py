"""Build hook for the optional native core (docs/decisions/native.md).

Everything else about the package lives in pyproject.toml. The extension is
`optional=True`: without a C compiler (or on a platform it does not support)
setuptools skips it and the pure-Python paths run, which are complete on
their own (ctindex/reconciler/native.py decides at import time).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup

# The scan reads the little-endian packed file table in place and uses
# POSIX fstatat/fdopendir: Linux and macOS on little-endian CPUs. The segment
# builder, the tokenizer, the ranking loops and the snippet window
# (ctindex/store/_invert.c, ctindex/providers/_words.c, ctindex/search/_rank.c,
# ctindex/search/_snippet.c) are portable C99, built beside it.
SUPPORTED = sys.byteorder == "little" and (
    sys.platform.startswith("linux") or sys.platform == "darwin"
)

ext_modules = (
    [
        Extension(
            "ctindex.reconciler._native",
            ["ctindex/reconciler/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-std=c99", "-Wall"],
        ),
        Extension(
            "ctindex.store._invert",
            ["ctindex/store/_invert.c"],
            depends=["ctindex/store/invert_api.h", "ctindex/store/crc32.h"],
            optional=True,
            extra_compile_args=["-O2", "-std=c99", "-Wall"],
        ),
        # Scores must be the pure path's bit for bit: no fused multiply-add.
        Extension(
            "ctindex.search._rank",
            ["ctindex/search/_rank.c"],
            depends=["ctindex/store/crc32.h"],
            optional=True,
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-ffp-contract=off"],
        ),
        Extension(
            "ctindex.search._snippet",
            ["ctindex/search/_snippet.c"],
            optional=True,
            extra_compile_args=["-O2", "-std=c99", "-Wall"],
        ),
        Extension(
            "ctindex.providers._words",
            ["ctindex/providers/_words.c"],
            depends=["ctindex/store/invert_api.h"],
            optional=True,
            extra_compile_args=["-O2", "-std=c99", "-Wall"],
        ),
    ]
    if SUPPORTED
    else []
)

setup(ext_modules=ext_modules)
