"""Benchmark runner: `python -m bench.run [NAME ...] [--output FILE]`.

Imports every `bench/bench_*.py` (or the NAMEs given, e.g. `rebuild` for
`bench_rebuild.py`) that defines `run() -> str`, calls it, and writes
`docs/benchmarks.md`: a header describing the machine, then each returned
Markdown section in name order. A benchmark that raises is reported in its
section and makes the runner exit 1 after writing the rest.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = HERE.parent / "docs" / "benchmarks.md"


def discover(names: list[str]) -> list[str]:
    """Module names `bench.bench_*` to run, sorted."""
    found = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if names:
        wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in names]
        missing = [n for n in wanted if n not in found]
        if missing:
            raise SystemExit(f"bench.run: no such benchmark: {', '.join(missing)}")
        found = wanted
    return [f"bench.{stem}" for stem in found]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_header() -> str:
    import psutil

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 0
    ram = psutil.virtual_memory().total
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "# Benchmarks",
            "",
            "Written by `nox -s bench` (`python -m bench.run`); each figure is measured",
            "side by side with its peer in the same run. Targets: docs/targets.md.",
            "",
            f"- date: {now}",
            f"- machine: {cores} cores ({_cpu_model()}), {ram / (1 << 30):.1f} GiB RAM",
            f"- kernel: {platform.system()} {platform.release()}",
            f"- Python: {platform.python_implementation()} {platform.python_version()}",
            "",
        ]
    )


def run_one(module_name: str) -> tuple[str, bool]:
    """(Markdown section, succeeded)."""
    started = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
        runner = getattr(module, "run", None)
        if not callable(runner):
            return f"## {module_name}\n\nskipped: defines no `run() -> str`.\n", False
        section = str(runner()).rstrip() + "\n"
    except Exception:  # one broken benchmark must not lose the others' figures
        detail = traceback.format_exc(limit=5)
        return f"## {module_name}\n\nfailed:\n\n```text\n{detail}```\n", False
    took = time.perf_counter() - started
    print(f"bench.run: {module_name} done in {took:.1f} s", file=sys.stderr)
    return section, True


def _kept_section(path: Path, start: str, end: str) -> str:
    """A section a standalone harness writes into the file between its
    markers (`python -m bench.relevance --write`, which needs a corpus
    installed at run time; `python -m bench.search_speed --write`, which
    needs Tantivy; `python -m bench.scale --write`, which needs the tldr
    pages): `nox -s bench` does not re-measure it but must not drop
    it either. Hand-written `###` comparisons right after the end marker
    (figures measured once, e.g. with and without proximity) are kept with
    it, up to the next `## ` section."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    if start not in text or end not in text:
        return ""
    inside, after = text.split(start, 1)[1].split(end, 1)
    tail = after.split("\n## ", 1)[0].strip("\n")
    return start + inside + end + "\n" + (f"\n{tail}\n" if tail else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    modules = discover(args.names)
    sections = [machine_header()]
    ok = True
    if not modules:
        sections.append("No benchmark modules (`bench/bench_*.py`) were found.\n")
    for name in modules:
        section, succeeded = run_one(name)
        sections.append(section)
        ok = ok and succeeded
    args.output.parent.mkdir(parents=True, exist_ok=True)
    from bench import relevance, scale, search_speed

    for harness in (relevance, search_speed, scale):
        kept = _kept_section(args.output, harness.START, harness.END)
        if kept:
            sections.append(kept)
    args.output.write_text("\n".join(sections), encoding="utf-8")
    print(f"bench.run: wrote {args.output}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
