"""Subcommands. Each module ``ctindex.commands.<name>`` exposes
``run(ctx: Context, args: argparse.Namespace) -> int`` (the exit code); the
CLI imports only the module of the command being run, so a command's
imports are its own cost. (`ctindex mcp` starts another entry point, the
MCP server: ctindex/cli.py runs it itself.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ctindex.base.output import emit, write_json
from ctindex.policy.project import Project

if TYPE_CHECKING:
    from ctindex.daemon.query import SearchCommand
    from ctindex.policy.plan import Plan
    from ctindex.query.statement import Freshness
    from ctindex.search.execute import Outcome
    from ctindex.search.query import Node
    from ctindex.service.no_scopes import NoScopes


# A search's fresh answer made elsewhere (the daemon's query path: ctindex/cli.py
# daemon_search): (the project, parsed query, limit) -> (freshness, outcome),
# printed by the command's own code so the bytes are the same.
QuickAnswer = Callable[[Project, "Node", int], "tuple[Freshness, Outcome]"]


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
        # A search's fresh answer made elsewhere, printed by the command's own
        # code so the bytes are the same: set only by the daemon's query path.
        self.answer: QuickAnswer | None = None
        # The CLI's search as a daemon run in this process answers with it
        # (`watch start --foreground`; ctindex/daemon/query.py SearchCommand).
        self.daemon_search: Callable[[], SearchCommand] | None = None
        self.colour = False  # --color: ANSI colour in the text output (ctindex/base/tty.py)
        self.null = False  # search -0: --paths/--ids entries NUL-terminated, as they are

    def emit_json(self, document: object) -> None:
        write_json(self.out, document)

    def echo(self, text: str = "", *, painted: bool = False) -> None:
        """One line (or block) of text output on stdout. Its control
        characters but newlines are escaped (ctindex/base/printable.py):
        a renderer escapes each data string with `printable.field`, so that
        a newline in a name cannot split a line, and this catches what one
        missed. `painted`: the text holds the renderer's own colour codes,
        every data string in it escaped already (search's result lines)."""
        if not painted:
            from ctindex.base import printable

            text = "\n".join(printable.line(part) for part in text.split("\n"))
        emit(self.out, text if text.endswith("\n") else text + "\n")

    def paint(self, text: str, colour: str | None = None, *attrs: str) -> str:
        """`text` in `colour` (a termcolor name) with `attrs` ("bold", "dark",
        ...) when colour is on, else as it is."""
        if not self.colour or not text:
            return text
        from termcolor import colored  # only a coloured output pays for it

        return colored(text, colour, attrs=list(attrs), force_color=True)

    def note(self, text: str) -> None:
        """An informational line on stderr, silenced by -q; one line whatever
        the data it quotes holds (ctindex/base/printable.py)."""
        if not self.quiet:
            from ctindex.base import printable

            self.err.write(f"ctindex: {printable.line(text)}\n")

    def no_scopes_note(self, plan: Plan) -> NoScopes | None:
        """The no-scopes note (ctindex/service/no_scopes.py) on stderr, not
        under --json (where it is a field) nor with -q; returned for the
        JSON document."""
        from ctindex.service.no_scopes import no_scopes

        found = no_scopes(plan)
        if found is not None and not self.json:
            self.note(found.line())
        return found
