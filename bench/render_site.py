"""Benchmark: where a daemon-answered search is rendered (docs/decisions/daemon-answers.md).

The daemon answers a `ctindex search` with the CLI's rendered text and,
beside it, the answer as data. Rendering in the client instead would make
every search process import what renders: the CLI's parser (the words
choose text, `--json`, `--paths`, markers, colour, quiet) and the search
command's output code. This bench runs, interleaved, in fresh processes
against one settled daemon on the four fixture bundles:

* `text`: the search as users run it (`python -m ctindex search margin`,
  the daemon renders);
* `data`: the same exchange through the same client (ctindex/fast_entry.py
  `_ask`), after importing what client-side rendering needs, the text then
  printed as received: a lower bound of rendering in the client (its
  parsing and formatting are not even counted);
* `python -c pass`: Python's own start, the floor of both.

`python -m bench.render_site [--runs N]` prints medians, and the ratio of
each to Python's start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERY = "margin"
# The client's exchange, after the imports rendering in the client needs.
DATA_CLIENT = """
import sys
from pathlib import Path
from ctindex import fast_entry
import ctindex.cli, ctindex.commands.search  # what would render the data here
from ctindex.ipc.runtime_dir import RuntimePaths
root = Path(sys.argv[1])
paths = RuntimePaths(root, root / ".ct" / "okf" / "runtime")
request = {"op": "search", "argv": ["search", sys.argv[2]], "cwd": str(root)}
got = fast_entry._ask(paths, request, 10.0)
assert got is not None and got["result"] is not None, "not answered by the daemon"
sys.stdout.write(got["stdout"])
"""


def _project() -> Path:
    root = Path(tempfile.mkdtemp(prefix="ctindex-render-"))
    fixtures = REPO / "fixtures" / "okf-bundles"
    for bundle in sorted(p for p in fixtures.iterdir() if p.is_dir()):
        shutil.copytree(bundle, root / bundle.name)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".ct").mkdir()
    (root / ".ct" / "index.jsonc").write_text('{"version": 1, "watch": true}\n')
    return root


def _run(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()
    root = _project()
    # A daemon even under CI; cached bytecode, as an installed package has
    # (some sandboxes set PYTHONDONTWRITEBYTECODE: every process would compile).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CTINDEX_WATCH"] = "1"
    python = sys.executable
    kinds = {
        "text (the daemon renders)": [python, "-m", "ctindex", "-C", str(root), "search", QUERY],
        "data (rendered here: imports only)": [python, "-c", DATA_CLIENT, str(root), QUERY],
        "python -c pass": [python, "-c", "pass"],
    }
    try:
        # Start the daemon, let the config age past the racy window so the
        # plan record is written, and settle (the bench measures that state).
        subprocess.run(kinds["text (the daemon renders)"], env=env, capture_output=True)
        time.sleep(2.5)
        for _ in range(5):
            _run(kinds["text (the daemon renders)"], env)
            _run(kinds["data (rendered here: imports only)"], env)
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.runs):
            for kind, argv in kinds.items():
                times[kind].append(_run(argv, env))
    finally:
        subprocess.run(
            [python, "-m", "ctindex", "-C", str(root), "watch", "stop"],
            capture_output=True,
            env=env,
        )
        shutil.rmtree(root, ignore_errors=True)
    floor = statistics.median(times["python -c pass"])
    print(f"| process ({args.runs} interleaved runs) | median ms | beyond Python's start |")
    print("| --- | --- | --- |")
    for kind, got in times.items():
        med = statistics.median(got)
        print(f"| {kind} | {med:.1f} | +{med - floor:.1f} ms |")


if __name__ == "__main__":
    main()
