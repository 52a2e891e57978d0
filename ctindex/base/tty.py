"""Whether text output is coloured (docs/cli.md, "Colour").

`--color=always|never` decides; `auto` (the default) colours only a
terminal, never when `NO_COLOR` is set to anything but the empty string
(https://no-color.org) or `TERM=dumb`. Standard library only: the query
path (ctindex/fast_entry.py) decides here too and sends the daemon the outcome,
so a daemon's answer is coloured exactly as the process's own would be.
"""

from __future__ import annotations

import os

# typing.TYPE_CHECKING without importing `typing` (the query path imports
# this module: ctindex/ipc/peer.py says what `typing` costs there).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

CHOICES = ("auto", "always", "never")
OPTION = "--color"


def colour_wanted(
    choice: str | None, stream: TextIO | None, environ: Mapping[str, str] = os.environ
) -> bool:
    if choice == "always":
        return True
    if choice == "never" or environ.get("NO_COLOR", "") or environ.get("TERM") == "dumb":
        return False
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or bare stream
        return False


def choice_in(argv: list[str]) -> str | None:
    """The last `--color` value among the options of `argv` (not after `--`)."""
    found = None
    for i, token in enumerate(argv):
        if token == "--":
            break
        if token.startswith(OPTION + "="):
            found = token.partition("=")[2]
        elif token == OPTION and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def decided(argv: list[str], stream: TextIO | None) -> list[str]:
    """`argv` with the colour decision made here, for a process whose output
    is not this terminal (the daemon answering a search): `--color=always`
    or `--color=never` as its last option."""
    flag = f"{OPTION}={'always' if colour_wanted(choice_in(argv), stream) else 'never'}"
    end = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:end], flag, *argv[end:]]
