"""One version for `ctindex --version` and the MCP server (ctindex/service/version.py)."""

from __future__ import annotations

from importlib.metadata import version as installed

from ctindex.service.version import version
from tests.conftest import cli_main


def test_the_version_is_the_installed_distributions() -> None:
    assert version() == installed("ctindex")
    assert cli_main("--version").out == f"ctindex {version()}\n"
