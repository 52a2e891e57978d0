"""How many of ctindex's modules each data flow runs through.

    python -m bench.flow_modules [--python PATH] [--list]

docs/architecture.md draws four data flows: a search the daemon answers, a
search with no daemon (reconcile-on-query), an `update`, and an event that
becomes a generation in the daemon. This counts, for each, the modules of
the installed `ctindex` (its packages' `__init__` excluded) in which a
function ran (and, beside it, how many were loaded) in the process doing
the work: the client process for the
two searches, the `update` process, and the daemon process (run in the
foreground through one edit and one barrier, then stopped). `--python`
runs the flows with another interpreter (another build's virtual
environment), so two trees can be compared side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLES = REPO / "fixtures" / "okf-bundles"
BOUND_S = 120  # any one step; a hang, not a speed limit

# Runs ctindex's console entry as `ctindex ARGS` would and, however it ends,
# writes the names of the ctindex modules it loaded to $FLOW_MODULES_OUT.
_WRAPPER = """
import atexit, json, os, runpy, sys, threading
_ran = set()
def _profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":
        name = frame.f_globals.get("__name__", "")
        if name.startswith("ctindex"):
            _ran.add(name)
sys.setprofile(_profile)
threading.setprofile(_profile)
def _dump():
    sys.setprofile(None)
    loaded = sorted(m for m, mod in sys.modules.items()
                    if m.startswith("ctindex") and mod is not None
                    and not (getattr(mod, "__file__", "") or "").endswith("__init__.py"))
    with open(os.environ["FLOW_MODULES_OUT"], "w") as fh:
        json.dump({"loaded": loaded, "ran": sorted(m for m in _ran if m in loaded)}, fh)
atexit.register(_dump)
_real_exit = os._exit  # the console entry skips interpreter teardown with it
def _exit(code):
    _dump()
    _real_exit(code)
os._exit = _exit
sys.argv = ["ctindex", *sys.argv[1:]]
runpy.run_module("ctindex", run_name="__main__", alter_sys=True)
"""


def _project(base: Path, watch: bool) -> Path:
    project = base / ("watched" if watch else "plain")
    shutil.copytree(BUNDLES, project / "okf")
    (project / ".ct").mkdir()
    scopes = [{"root": "okf", "provider": "okf-markdown"}]
    config = {"version": 1, "watch": watch, "scopes": scopes}
    (project / ".ct" / "index.jsonc").write_text(json.dumps(config))
    return project


def _ctindex(python: str, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "ctindex", "-C", str(project), *args],
        cwd=project,  # not this checkout: `-m` would import the package from here
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )


def _traced(python: str, project: Path, out: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, FLOW_MODULES_OUT=str(out))
    return subprocess.Popen(
        [python, "-c", _WRAPPER, "-C", str(project), *args],
        env=env,
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _loaded(out: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = json.loads(out.read_text())
    return found


def _wait_for(predicate: object, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.05)
    raise SystemExit(f"flow_modules: {what} did not happen within {BOUND_S} s")


def _answered_by_daemon(python: str, project: Path) -> bool:
    got = _ctindex(python, project, "--json", "search", "customer")
    if os.environ.get("FLOW_MODULES_DEBUG"):
        print(got.returncode, got.stdout[-300:], got.stderr[-300:], file=sys.stderr)
    return got.returncode in (0, 1) and '"watcher-clean"' in got.stdout


def measure(python: str) -> dict[str, dict[str, list[str]]]:
    flows: dict[str, dict[str, list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="flow-modules-") as tmp:
        base = Path(tmp)
        plain, watched = _project(base, False), _project(base, True)
        out = base / "modules.json"

        _ctindex(python, plain, "update")
        proc = _traced(python, plain, out, "search", "customer")
        proc.communicate(timeout=BOUND_S)
        flows["search, no daemon (reconcile-on-query)"] = _loaded(out)

        (plain / "okf" / "flow-note.md").write_text("# Flow note\n\nzqflow7x\n")
        proc = _traced(python, plain, out, "update")
        proc.communicate(timeout=BOUND_S)
        flows["update"] = _loaded(out)

        _ctindex(python, watched, "update")
        _ctindex(python, watched, "watch", "start")
        try:
            _wait_for(lambda: _answered_by_daemon(python, watched), "a daemon answer")
            proc = _traced(python, watched, out, "search", "customer")
            proc.communicate(timeout=BOUND_S)
            flows["search, daemon answers (client process)"] = _loaded(out)
        finally:
            _ctindex(python, watched, "watch", "stop")

        daemon_out = base / "daemon.json"
        daemon = _traced(python, watched, daemon_out, "watch", "start", "--foreground")
        try:
            _wait_for(lambda: _answered_by_daemon(python, watched), "a foreground daemon")
            (watched / "okf" / "flow-note.md").write_text("# Flow note\n\nzqflow7x\n")
            _ctindex(python, watched, "search", "zqflow7x")  # the barrier: the event applied
        finally:
            _ctindex(python, watched, "watch", "stop")
            daemon.communicate(timeout=BOUND_S)
        flows["event -> generation (daemon process)"] = _loaded(daemon_out)
    return flows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flow_modules")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run with")
    parser.add_argument("--list", action="store_true", help="also list each flow's modules")
    args = parser.parse_args(argv)
    flows = measure(args.python)
    print("| flow | ctindex modules whose functions ran | loaded |")
    print("| --- | ---: | ---: |")
    for flow, found in flows.items():
        print(f"| {flow} | {len(found['ran'])} | {len(found['loaded'])} |")
    if args.list:
        for flow, found in flows.items():
            print(f"\n{flow}:\n  " + "\n  ".join(found["ran"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
