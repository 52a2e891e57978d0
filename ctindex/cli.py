"""Command-line front end: `ctindex <command>`, and `ct okf index <command>` /
`ct okf search QUERY` as aliases (docs/cli.md).

Parsing is argparse; each command lives in ``ctindex.commands.<name>`` and
is imported only when run, so `why` and `scopes` never load index, search or
daemon code. Exit codes: 0 success, 1 no hit / not included, 2 the policy
cannot be honoured (or a usage error), 3 `watch status`: no daemon runs
(as systemctl), 74 stdout cannot be written (a full disk, `> /dev/full`, a
broken pipe) or stdout or stderr is closed (ctindex/base/streams.py),
130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from ctindex.base import streams
from ctindex.base.output import OutputError, emit, flush, output_failed
from ctindex.errors import CtindexError

if TYPE_CHECKING:
    from ctindex.commands import Context, QuickAnswer
    from ctindex.daemon.query import Answer as DaemonSearched
    from ctindex.daemon.query import DaemonAnswer, SearchCommand
    from ctindex.ipc.protocol import SearchResult
    from ctindex.policy.project import Project
    from ctindex.query.statement import Freshness
    from ctindex.search.execute import Outcome
    from ctindex.search.query import Node

PROG = "ctindex"
COMMANDS = (
    "init",
    "scopes",
    "why",
    "status",
    "update",
    "rebuild",
    "verify",
    "search",
    "show",
    "watch",
    "mcp",
    "help",
    "completion",
)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter with the width found without `shutil`: argparse
    builds one per parser and argument and imports shutil (with bz2, lzma
    and locale) just to read the terminal width, ~3 ms of every command."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog,
            indent_increment,
            max_help_position,
            width if width is not None else _columns() - 2,
        )


def _columns() -> int:
    # shutil.get_terminal_size's rule: $COLUMNS, else the terminal, else 80.
    with contextlib.suppress(KeyError, ValueError):
        return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


# Closer than difflib's default for commands and options: among a dozen
# short names 0.6 also names unrelated ones (`--limt` would suggest --quiet).
NAME_CUTOFF = 0.7


class UsageExit(SystemExit):
    """A usage error: `line` is the one line for stderr (exit 2). A SystemExit,
    as argparse's own, so callers that catch that (the daemon's query path)
    keep working."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


class _Parser(argparse.ArgumentParser):
    """argparse's parser with the CLI's error rules (docs/cli.md, "Usage
    errors"): one line, `ctindex COMMAND: what: problem`, the argument named
    as on the command line (`--limit`, `ACTION`), never argparse's internal
    names, and the close matches of a mistyped command or choice
    (ctindex/base/suggest.py). Every parser is made with `allow_abbrev=False`:
    `--lim` is an unknown option, not `--limit`, so a script's spelling
    cannot start meaning something else when an option is added."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        # ArgumentError's text is "argument NAME: problem"; NAME alone reads as
        # the command line does.
        raise UsageExit(f"{self.prog}: {message.removeprefix('argument ')}")

    def _parse_optional(
        self, arg_string: str
    ) -> tuple[argparse.Action | None, str, str | None] | None:
        # `search -0` makes argparse read every word that looks like a negative
        # number as an option (`-2023` an unknown one, `-05` as -0 with an
        # argument); such a word is a query word, as it was before -0 was
        # added: excluding it (docs/search.md). Only -0 itself is the option.
        if arg_string not in self._option_string_actions and self._negative_number_matcher.match(
            arg_string
        ):
            return None
        return super()._parse_optional(arg_string)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        from ctindex.base.suggest import close_matches, did_you_mean

        known = [str(c) for c in choices]
        hint = did_you_mean(close_matches(str(value), known, cutoff=NAME_CUTOFF), quote=True)
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(
                None, f"unknown command {value!r}{hint} (commands: {', '.join(known)})"
            )
        raise argparse.ArgumentError(
            action, f"invalid choice {value!r}{hint} (choose from {', '.join(known)})"
        )


def _global_flags() -> _Parser:
    # SUPPRESS defaults let the same flags appear before or after the
    # subcommand without the subparser resetting what the main parser read.
    flags = _Parser(add_help=False, formatter_class=_Formatter, allow_abbrev=False)
    flags.add_argument(
        "-C",
        "--project",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="project folder; relative PATHs are taken from it, as with `git -C` "
        "(default: nearest folder above with .ct/ or .git)",
    )
    flags.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON document on stdout"
    )
    flags.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no notes or progress on stderr; `why`, `update` and `rebuild` print nothing "
        "(but failures), `verify` nothing when clean",
    )
    flags.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        metavar="WHEN",
        default=argparse.SUPPRESS,
        help="colour the text output: auto (default: on a terminal, unless NO_COLOR is set), "
        "always, never",
    )
    return flags


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _init_args(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the configuration (default)")
    mode.add_argument("--write", action="store_true", help="write .ct/index.jsonc")


def _scopes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=("add", "remove"),
        default=None,
        metavar="ACTION",
        help="add or remove the scope DIR in .ct/index.jsonc (comments are kept)",
    )
    p.add_argument("dir", nargs="?", default=None, metavar="DIR", help="the scope's root folder")
    p.add_argument(
        "--provider",
        metavar="ID",
        default=None,
        help="scopes add: the provider of the new scope (default: okf-markdown)",
    )
    p.add_argument(
        "--effective",
        action="store_true",
        help="also every setting with its origin, hard rules and plan digest",
    )


class _RawFormatter(_Formatter):
    """Keeps the epilog's lines (the query syntax table) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


def _why_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a file or folder, relative to the working folder (or -C); need not exist",
    )


def _status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also list every provider error and frontmatter warning, with its path",
    )
    _metrics_arg(p)


def _write_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strict",
        nargs="?",
        const="all",
        default=None,
        metavar="KINDS",
        help="exit 2 naming each file when any of KINDS occurs: errors, warnings, "
        "missing-roots, comma-separated (default: all)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also list the files skipped for a reserved name (index.md, log.md)",
    )
    _metrics_arg(p)


_QUERY_SYNTAX = """\
query syntax (docs/search.md):
  margin revenue        every word (implicit AND; an explicit AND is the same)
  "gross margin"        the words consecutively, inside one field
  marg*                 a word starting with the prefix
  -legacy               not matching the clause
  a OR b                either side; OR binds tighter than AND
  ( ... )               group clauses
  tables/transactions   a concept ID, or the phrase of its words
  cafe                  also finds Café (accents and compatibility forms fold)

fields (NAME:value or NAME:"several words"; names in any case):
  title:margin          the words, consecutively, in the title
  description:revenue   the words, consecutively, in the description
  tags:finance          a whole tag (tag: is the same)
  type:Metric           the whole type, or one word of it
  id:tables/orders      the concept with this ID
  path:okf/bundles/ga4/ paths starting with the value
  An unknown NAME: is an error (exit 2) naming the closest field. A word
  with a colon is text when the part before it is not a name (12:30) or the
  part after it starts with / or : (http://x, std::vector); quote any other
  ("note:x") to search it as text.

examples (quoted: the shell would eat the quotes and expand the *):
  ctindex search '"gross margin" OR revenue*'
  ctindex search 'tags:finance -type:Policy margin'
  ctindex search 'title:"gross margin"'

ranking: exact title/ID matches first, then BM25F (docs/search.md)."""


def _search_args(p: argparse.ArgumentParser) -> None:
    p.epilog = _QUERY_SYNTAX
    p.formatter_class = _RawFormatter
    p.add_argument(
        "query",
        nargs="+",
        metavar="QUERY",
        help="query words, joined with spaces (syntax below); after `--` even -word",
    )
    p.add_argument(
        "--direct", action="store_true", help="answer by reading the files, without the index"
    )
    p.add_argument(
        "--limit",
        type=_positive,
        default=None,
        metavar="N",
        help="show at most N results (default: 10; every match with --paths/--ids)",
    )
    p.add_argument(
        "--markers",
        type=_markers,
        default=None,
        metavar="OPEN,CLOSE",
        help="wrap matched words of snippets in OPEN and CLOSE (default: «,» without colour, "
        "none with colour; ',' for none)",
    )
    listing = p.add_mutually_exclusive_group()
    listing.add_argument(
        "--paths",
        action="store_true",
        help="print only the matching paths, one a line, like `rg -l` (freshness on stderr)",
    )
    listing.add_argument(
        "--ids", action="store_true", help="print only the matching concept IDs, one a line"
    )
    p.add_argument(
        "-0",
        "--null",
        action="store_true",
        help="with --paths/--ids: end each entry with a NUL instead of a newline and print it "
        "unescaped, its bytes as they are (for `xargs -0`, as `find -print0`)",
    )


def _markers(text: str) -> tuple[str, str]:
    """OPEN,CLOSE: text without control characters. Markers are printed as
    they are, beside escaped document text (ctindex/base/printable.py), so a
    control sequence here would be the one raw one on the line; colour is
    --color's job."""
    from ctindex.base.printable import line

    open_, comma, close = text.partition(",")
    if not comma or "," in close or line(text) != text:
        raise argparse.ArgumentTypeError(
            f"expected OPEN,CLOSE of printable text (e.g. '[[,]]'), got {text!r}"
        )
    return open_, close


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "concept",
        metavar="ID",
        help="concept ID (path in its bundle without .md) or project-relative path",
    )
    p.add_argument(
        "--scope",
        metavar="ROOT",
        default=None,
        help="the scope root to look in when the ID is in several",
    )


def _mcp_args(p: argparse.ArgumentParser) -> None:
    del p  # no options: the host talks over stdin/stdout (docs/mcp.md)


def _help_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "topic",
        nargs="?",
        choices=COMMANDS,
        metavar="COMMAND",
        help="the command to explain (all of them when absent)",
    )


SHELLS = ("bash", "zsh", "fish")


def _completion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help=f"one of {', '.join(SHELLS)}")


def _watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("status", "start", "stop"),
        metavar="ACTION",
        help="status (exit 0 running, 1 not answering, 3 not running), start, or stop",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="watch start: start a daemon even when CI is set (it would outlive the job)",
    )
    p.add_argument(
        "--foreground",
        action="store_true",
        help="start: run the daemon in this process until it is stopped, "
        "without the idle exit (a service manager keeps it: docs/network-shares.md)",
    )


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repair",
        action="store_true",
        help="fix what was found (damage: rebuild; drift: update), then verify again",
    )
    _metrics_arg(p)


def _metrics_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-file",
        metavar="PATH",
        default=None,
        help="also write the metrics in the Prometheus textfile format (atomically)",
    )


# name -> (help, declares the command's own arguments)
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "init": ("print (default) or write the derived .ct/index.jsonc; never indexes", _init_args),
    "scopes": (
        "show scopes, exclusions, origins, provider versions and limits; "
        "`scopes add|remove DIR` edits them",
        _scopes_args,
    ),
    "why": ("decision trace per path; exit 0 only if every path is included", _why_args),
    "status": ("index and watcher metrics", _status_args),
    "update": ("full reconciliation; publishes a generation if something changed", _write_args),
    "rebuild": ("build a fresh index and publish it atomically", _write_args),
    "verify": (
        "read every byte of the index and compare it with the files; writes nothing "
        "unless --repair",
        _verify_args,
    ),
    "search": ("indexed query; exit 1 when nothing matches", _search_args),
    "show": (
        "print a concept by its ID; exit 1 when there is none (close matches on stderr)",
        _show_args,
    ),
    "watch": ("daemon control", _watch_args),
    "mcp": ("serve the Model Context Protocol over stdio (needs the mcp extra)", _mcp_args),
    "help": ("the help of a command: `ctindex help search`", _help_args),
    "completion": (
        'print the shell\'s completion script: eval "$(ctindex completion bash)"',
        _completion_args,
    ),
}


def build_parser(only: str | None = None) -> _Parser:
    """The whole parser; with `only`, every command is known but only that
    one's arguments are declared (each parser argparse builds costs time a
    search should not pay for the other seven)."""
    flags = _global_flags()
    parser = _Parser(
        prog=PROG,
        parents=[flags],
        formatter_class=_Formatter,
        description="Persistent full-text index of OKF concept documents, never silently stale.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    parser.commands = {}
    for name, (text, declare) in _COMMANDS.items():
        if only is None or name == only:
            command = sub.add_parser(
                name,
                parents=[flags],
                help=text,
                description=text,
                formatter_class=_Formatter,
                allow_abbrev=False,
            )
            declare(command)
        else:
            command = sub.add_parser(
                name, help=text, add_help=False, formatter_class=_Formatter, allow_abbrev=False
            )
        parser.commands[name] = command
    return parser


_PARSERS: dict[str | None, _Parser] = {}


def parser_for(argv: list[str]) -> _Parser:
    """The parser for `argv`'s command, built once per process: a command
    process parses once anyway, the daemon's query path (ctindex/daemon/
    query.py) parses every search it answers and would otherwise spend most
    of a query building parsers. Parsing leaves a parser unchanged; help
    and usage text read the terminal width when printed, not here."""
    command = command_of(argv)
    parser = _PARSERS.get(command)
    if parser is None:
        parser = _PARSERS[command] = build_parser(command)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """`argv` parsed; a usage error raises UsageExit with its one line. An
    unknown option is named with the close matches among the options of
    its command (and the global ones)."""
    parser = parser_for(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = parser.commands.get(getattr(args, "command", None) or "", parser)
        command.error(_unexpected(extras[0], command))
    if getattr(args, "null", False) and not (args.paths or args.ids):
        # -0 ends listing entries; the result text has lines of its own.
        parser.commands["search"].error("-0/--null: goes with --paths or --ids")
    return args


def _unexpected(token: str, command: argparse.ArgumentParser) -> str:
    if not token.startswith("-") or token == "-":
        return f"unexpected argument {token!r}"
    from ctindex.base.suggest import close_matches, did_you_mean

    known = [o for action in command._actions for o in action.option_strings]
    name = token.partition("=")[0]
    close = close_matches(name, known, cutoff=NAME_CUTOFF)
    return f"unknown option {name!r}{did_you_mean(close, quote=True)}"


def command_of(argv: list[str]) -> str | None:
    """The command word of `argv` (the first positional that is not the value
    of -C/--project), when it names a command."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return None
        if token in _GLOBAL_WITH_VALUE:
            i += 2
            continue
        if not token.startswith("-"):
            return token if token in _COMMANDS else None
        i += 1
    return None


def daemon_search() -> SearchCommand:
    """This CLI's `search` for a daemon to answer with (ctindex/daemon/query.py):
    its parser, and `main` with the answer the daemon made, stated as a plain
    watcher-clean answer from the generation its barrier vouched for."""
    from ctindex.daemon.query import SearchCommand

    def run(argv: list[str], out: TextIO, err: TextIO, cwd: str, answer: DaemonAnswer) -> int:
        def fresh(project: Project, node: Node, limit: int) -> tuple[Freshness, Outcome]:
            from ctindex.query.statement import Freshness

            got = answer(project, node, limit)
            return Freshness.watcher_clean(got.generation, got.barrier_ms), got.outcome

        return main(argv, stdout=out, stderr=err, cwd=cwd, answer=fresh)

    def data(project: Project, got: DaemonSearched) -> SearchResult:
        from ctindex.query.statement import Freshness
        from ctindex.service.search import as_data, finish

        stated = Freshness.watcher_clean(got.generation, got.barrier_ms)
        return as_data(*finish(project.root, stated, got.outcome))

    return SearchCommand(parse, run, data)


def completion_script(shell: str) -> str:
    """The script that makes `shell` complete ctindex's commands, options
    and choices (argcomplete's, docs/cli.md "Shell completion"): it asks
    `ctindex` itself, with `_ARGCOMPLETE` set, at each Tab."""
    import argcomplete

    return str(argcomplete.shellcode([PROG], shell=shell))


def _complete() -> None:
    """Answer a shell's Tab (argcomplete), then exit; only when it asks."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(build_parser())


def console() -> None:
    """Entry point of a `ctindex` process (console script, `python -m ctindex`).

    A command is a short-lived process: the cyclic garbage collector only
    costs time while hundreds of modules' objects are created (it is turned
    back on before anything that indexes), and the interpreter's teardown
    (freeing every module and object one by one, ~7 ms of a 55 ms search)
    is skipped with `os._exit` once the output is flushed. Everything a
    command writes to the index is fsynced before it returns.
    """
    gc.disable()
    _complete()  # a Tab in the shell: the completions, then exit
    refused = streams.prepare()  # a closed stdout or stderr, a pipe nobody reads
    if refused is not None:
        os._exit(refused)
    code = main()
    try:
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = 130
    except OSError as exc:  # what main() wrote is lost (a broken pipe too): never exit 0 for it
        code = _report(sys.stderr, streams.line_for(exc), streams.EX_IOERR)
    except ValueError:  # stdout already closed
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _report(err: TextIO, line: str, code: int) -> int:
    """Print one error line (a full or closed stderr is ignored); returns `code`."""
    with contextlib.suppress(OSError, ValueError):
        err.write(line + "\n")
        err.flush()
    return code


def main(
    argv: list[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    cwd: str | os.PathLike[str] | None = None,
    answer: QuickAnswer | None = None,
) -> int:
    """Run one command; returns the exit code (the console script exits with it).
    `answer`: how `search` gets its fresh answer instead of its own barrier
    (the daemon's query path, ctindex/daemon/query.py; None everywhere else)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if out is None or err is None:  # started without them (ctindex/base/streams.py)
        if err is not None:
            _report(err, streams.output_failed_line(streams.CLOSED), streams.EX_IOERR)
        return streams.EX_IOERR
    if out is sys.stdout and isinstance(out, io.TextIOWrapper):
        # Keys of undecodable names are surrogate-escaped: `search -0` prints
        # their bytes (text escapes them: ctindex/base/printable.py).
        out.reconfigure(errors="surrogateescape")
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        return _run(args, out, err, cwd, answer)
    except CtindexError as exc:
        _report(err, f"{PROG}: {exc}", exc.exit_code)
        if isinstance(exc, OutputError):
            _silence_stdout(out)  # the final flush must not fail a second time
        # A JSON reader gets the error as JSON too (schemas/error.json),
        # unless stdout itself is what failed: the line above is all there is.
        if _wants_json(args) and not isinstance(exc, OutputError):
            return _json_error(out, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError as exc:  # a write that did not go through emit(): the same line
        _silence_stdout(out)
        return _report(err, streams.line_for(exc), streams.EX_IOERR)


def _json_error(out: TextIO, exc: CtindexError) -> int:
    """Write `exc` as the command's JSON document; returns its exit code, or
    74 when stdout cannot take it (the stderr line is already out)."""
    from ctindex.base.output import write_json

    error: dict[str, object] = {
        "message": str(exc),
        "kind": type(exc).__name__,
        "exit_code": exc.exit_code,
    }
    for extra in ("suggestions", "candidates"):  # ctindex.errors: `show`'s lists
        if getattr(exc, extra, None):
            error[extra] = list(getattr(exc, extra))
    if getattr(exc, "no_scopes", None):  # show: why no concept can exist
        error["no_scopes"] = exc.no_scopes  # type: ignore[attr-defined]
    try:
        write_json(out, {"error": error})
        flush(out)
    except OutputError:
        _silence_stdout(out)  # the interpreter's final flush must not fail again
        return OutputError.exit_code
    return exc.exit_code


def _run(
    argv: list[str],
    out: TextIO,
    err: TextIO,
    cwd: str | os.PathLike[str] | None,
    answer: QuickAnswer | None = None,
) -> int:
    parser = parser_for(argv)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parse(argv)
    except UsageExit as exc:
        _report(err, exc.line, 2)
        if _wants_json(argv):
            from ctindex.base.output import write_json

            message = exc.line.removeprefix(f"{PROG}: ").removeprefix(f"{PROG} ")
            write_json(out, {"error": {"message": message, "kind": "UsageError", "exit_code": 2}})
        return 2
    except SystemExit as exc:  # --help: printed
        return exc.code if isinstance(exc.code, int) else 2
    except OSError as exc:  # --help into a full stdout or a broken pipe
        raise output_failed(exc) from None
    if args.version:
        from ctindex.service.version import version

        emit(out, f"{PROG} {version()}\n")
        return 0
    from ctindex.errors import UsageError

    if not args.command:  # a usage error like argparse's, with --json's error object
        parser.print_usage(err)
        raise UsageError(f"a command is required ({', '.join(COMMANDS)})")
    if args.command in ("help", "completion") and getattr(args, "json", False):
        raise UsageError(f"{args.command}: --json does not apply (it prints text)")
    if args.command == "help":  # needs no project
        topic = getattr(args, "topic", None)
        shown = build_parser(topic)
        emit(out, (shown.commands[topic] if topic else shown).format_help())
        return 0
    if args.command == "completion":
        emit(out, completion_script(args.shell))
        return 0

    from ctindex.commands import Context
    from ctindex.policy.project import Project, find_root, start_folder

    # Like `git -C`: run as if started in DIR; the project is found from
    # there exactly as from the working directory (docs/cli.md "Project").
    start = start_folder(
        os.path.abspath(cwd if cwd is not None else os.getcwd()), getattr(args, "project", None)
    )
    here = Path(start)
    root = find_root(start)
    if root is None and _writes(args):
        # With -C the folder is named already: only `init` there can help.
        hint = (
            f"run `ctindex -C {start} init --write` to make one there"
            if getattr(args, "project", None)
            else "run `ctindex init --write` or pass -C"
        )
        raise UsageError(f"no ctindex project at or above {start} (no .ct/ or .git); {hint}")
    project = Project.at(root or start)
    # Before anything is made: a project folder of another user is theirs.
    # Not in the daemon's query path (`answer`): the daemon is the folder's
    # owner, asked only by its own user (ctindex/ipc/peer.py), and its own
    # passes are checked where they write (ctindex/policy/store_path.py).
    if answer is None and _writes_store(args):
        from ctindex.policy.config import refuse_foreign_writer

        refuse_foreign_writer(project)
    ctx = Context(
        project=project,
        json=getattr(args, "json", False),
        quiet=getattr(args, "quiet", False),
        out=out,
        err=err,
        cwd=here,
    )
    ctx.answer = answer
    ctx.daemon_search = daemon_search
    from ctindex.base.tty import colour_wanted

    ctx.colour = colour_wanted(getattr(args, "color", None), out)
    ctx.null = getattr(args, "null", False)
    if args.command == "mcp":  # the MCP server is an entry point of its own, not a command
        gc.enable()
        return _serve_mcp(ctx)
    name = f"ctindex.commands.{args.command}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        err.write(f"{PROG}: '{args.command}' is not available in this build\n")
        return 2
    if args.command != "search":  # search turns it on itself when it must index
        gc.enable()
    code: int = module.run(ctx, args)
    flush(out)
    return code


def _serve_mcp(ctx: Context) -> int:
    """`ctindex mcp`: the Model Context Protocol server over stdio
    (ctindex/mcp_server.py, docs/mcp.md). Needs the optional extra `mcp`
    (`pip install -e '.[mcp]'` in the checkout)."""
    from ctindex.errors import UsageError

    if ctx.json:  # stdout is the JSON-RPC stream: there is no document to print
        raise UsageError("mcp: --json does not apply (the server speaks JSON-RPC on stdout)")
    try:
        from ctindex import mcp_server
    except ImportError as exc:  # only the SDK's absence; our own modules always import
        raise UsageError(
            "`ctindex mcp` needs the MCP SDK: pip install -e '.[mcp]' in the ctindex "
            f"checkout, or pip install 'mcp>=2.3,<3' ({exc.name or exc} is missing)"
        ) from exc
    return mcp_server.serve(ctx.project.root)


def _writes(args: argparse.Namespace) -> bool:
    """True for a command that would create index or runtime files (`.ct/okf/`)
    or start a daemon: outside any project these refuse (exit 2) instead of
    making the working folder a project. `init --write` is how one is made;
    read-only commands describe the folder as it would be."""
    if args.command in ("update", "rebuild"):
        return True
    if args.command == "search":
        return not getattr(args, "direct", False)
    if args.command in ("show", "mcp"):  # both read a fresh index (suggestions, search)
        return True
    return args.command == "watch" and getattr(args, "action", None) == "start"


def _writes_store(args: argparse.Namespace) -> bool:
    """True for a command that may write under `.ct` or start a daemon: those
    of `_writes`, `init --write`, `scopes add`/`remove` and `verify --repair`.
    In a project folder of another user these refuse (exit 2,
    docs/cli.md "Refused store folders"); the others only read."""
    if _writes(args):
        return True
    if args.command == "init":
        return bool(getattr(args, "write", False))
    if args.command == "scopes":
        return getattr(args, "action", None) is not None
    return args.command == "verify" and bool(getattr(args, "repair", False))


def _silence_stdout(out: TextIO) -> None:
    # Python's documented recipe: point stdout at devnull so the interpreter's
    # final flush does not raise a second BrokenPipeError.
    if out is sys.stdout:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, sys.stdout.fileno())
            finally:
                os.close(devnull)


_GLOBAL_WITH_VALUE = ("-C", "--project", "--color")


def _wants_json(argv: list[str]) -> bool:
    """`--json` among the options (not a query word after `--`, not the value of -C)."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return False
        if token == "--json":
            return True
        i += 2 if token in _GLOBAL_WITH_VALUE else 1
    return False


def ct_main(argv: list[str] | None = None) -> int:
    """`ct okf index <cmd> ...` == `ctindex <cmd> ...`; `ct okf search Q` == `ctindex search Q`."""
    if argv is None:  # the `ct` console script: as `ctindex` (ctindex/base/streams.py)
        refused = streams.prepare()
        if refused is not None:
            return refused
    args = sys.argv[1:] if argv is None else list(argv)
    positions: list[int] = []
    i = 0
    while i < len(args) and len(positions) < 2:
        token = args[i]
        if token in _GLOBAL_WITH_VALUE:
            i += 2
            continue
        if not token.startswith("-"):
            positions.append(i)
        i += 1
    words = [args[p] for p in positions]
    if words == ["okf", "index"]:
        return main([a for n, a in enumerate(args) if n not in positions])
    if words == ["okf", "search"]:
        return main([a for n, a in enumerate(args) if n != positions[0]])
    if not positions and "--version" in args:
        return main(args)
    if not positions and ("-h" in args or "--help" in args):
        sys.stdout.write(_CT_USAGE)
        return 0
    sys.stderr.write(
        _CT_USAGE.splitlines(keepends=True)[0]
        + "ct: only the 'okf index' and 'okf search' commands are provided here\n"
    )
    return 2


_CT_USAGE = """\
usage: ct okf index COMMAND [...] | ct okf search QUERY [...]
`ct okf index COMMAND` is `ctindex COMMAND`, `ct okf search` is `ctindex search`:
`ctindex --help` lists the commands and `ctindex COMMAND --help` their options.
"""
