"""Subcommands. Each module ``ctindex.commands.<name>`` exposes
``run(ctx: Context, args: argparse.Namespace) -> int`` (the exit code); the
CLI imports only the module of the command being run, so a command's
imports are its own cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ctindex.output import write_json
from ctindex.project import Project


@dataclass
class Context:
    project: Project
    json: bool          # --json: one JSON document on `out`
    quiet: bool         # -q: no notes or progress on `err`
    out: TextIO
    err: TextIO
    cwd: Path           # relative PATH arguments are taken from here

    def emit_json(self, document: Any) -> None:
        write_json(self.out, document)

    def echo(self, text: str = "") -> None:
        """One line (or block) of text output on stdout."""
        self.out.write(text if text.endswith("\n") else text + "\n")

    def note(self, text: str) -> None:
        """An informational line on stderr, silenced by -q."""
        if not self.quiet:
            self.err.write(f"ctindex: {text}\n")
