"""Entry point of the daemon process, started by ctindex.client.spawn without a shell,
with no inherited standard streams, in its own session."""

from __future__ import annotations

import argparse
import sys

EXIT_REFUSED = 3  # the platform cannot authenticate peers (docs/daemon.md)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctindex.daemon")
    parser.add_argument("--project", required=True, help="project root folder")
    parser.add_argument("--claim", default=None, help="token of the launcher's startup claim")
    parser.add_argument(
        "--successor",
        action="store_true",
        help="a daemon of another build is leaving: wait for its lock",
    )
    args = parser.parse_args(argv)

    from ctindex.ipc.build_id import build_id
    from ctindex.ipc.peer import no_peer_check
    from ctindex.ipc.runtime_dir import RuntimePaths
    from ctindex.ipc.spawn_failure import record_spawn_failure

    build_id()  # before the rest of the daemon's code is imported: what it runs
    from ctindex.cli import daemon_search
    from ctindex.daemon.layers import RealEngine
    from ctindex.daemon.lifecycle import Daemon
    from ctindex.policy.project import Project

    project = Project.at(args.project)
    paths = RuntimePaths.for_project(project)
    disabled = no_peer_check()
    if disabled is not None:
        # Serving peers nobody can identify would hand the index to any local
        # user: refuse, in one line, and back clients off (docs/daemon.md).
        print(f"ctindex daemon: {disabled}", file=sys.stderr)
        record_spawn_failure(paths, disabled)
        return EXIT_REFUSED
    try:
        Daemon(
            project,
            paths,
            RealEngine(project),
            args.claim,
            successor=args.successor,
            search=daemon_search(),
        ).run()
    except Exception as exc:  # before the lock/log exist: all we can do is back clients off
        record_spawn_failure(paths, f"daemon start: {type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
