"""Subcommands. Each module ``ctindex.commands.<name>`` exposes
``run(ctx: Context, args: argparse.Namespace) -> int`` (the exit code); the
CLI imports only the module of the command being run, so a command's
imports are its own cost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ctindex.base.output import emit, write_json
from ctindex.policy.project import Project

if TYPE_CHECKING:
    from ctindex.query.freshness import Freshness
    from ctindex.search.execute import Outcome
    from ctindex.search.query import Node

# A search's fresh answer made elsewhere (the daemon's query path,
# ctindex/daemon/query.py): (context, parsed query, limit) -> (freshness,
# outcome), printed by the command's own code so the bytes are the same.
QuickAnswer = Callable[["Context", "Node", int], "tuple[Freshness, Outcome]"]


class Context:
    """What every command gets (a plain class: dataclasses cost a search ~8 ms
    of imports)."""

    def __init__(
        self, project: Project, json: bool, quiet: bool, out: TextIO, err: TextIO, cwd: Path
    ) -> None:
        self.project = project
        self.json = json  # --json: one JSON document on `out`
        self.quiet = quiet  # -q: no notes or progress on `err`
        self.out = out
        self.err = err
        self.cwd = cwd  # relative PATH arguments are taken from here
        self.answer: QuickAnswer | None = None  # set only by the daemon's query path
        self.colour = False  # --color: ANSI colour in the text output (ctindex/base/tty.py)

    def emit_json(self, document: Any) -> None:
        write_json(self.out, document)

    def echo(self, text: str = "") -> None:
        """One line (or block) of text output on stdout."""
        emit(self.out, text if text.endswith("\n") else text + "\n")

    def paint(self, text: str, colour: str | None = None, *attrs: str) -> str:
        """`text` in `colour` (a termcolor name) with `attrs` ("bold", "dark",
        ...) when colour is on, else as it is."""
        if not self.colour or not text:
            return text
        from termcolor import colored  # only a coloured output pays for it

        return colored(text, colour, attrs=list(attrs), force_color=True)

    def note(self, text: str) -> None:
        """An informational line on stderr, silenced by -q."""
        if not self.quiet:
            self.err.write(f"ctindex: {text}\n")
