"""Fixtures shared by the reconciler room's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A fresh folder and an open descriptor of it (closed afterwards), for
    the native reads that take one."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield tmp_path, fd
    finally:
        os.close(fd)
