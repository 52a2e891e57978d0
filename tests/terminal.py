"""Run a process with its stdout on a pseudo-terminal (what `isatty` sees
on a person's screen), collecting what it wrote."""

from __future__ import annotations

import os
import select
import subprocess
import time

HANG_GUARD_S = 60.0


def run_on_terminal(
    command: list[str], env: dict[str, str] | None = None, cwd: str | None = None
) -> tuple[int, str, str]:
    """(exit code, stdout with the terminal's \\r\\n made \\n, stderr)."""
    leader, follower = os.openpty()
    try:
        proc = subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE, env=env, cwd=cwd)
    finally:
        os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + HANG_GUARD_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                data = os.read(leader, 1 << 16)
            except OSError:  # EIO: the process closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    out = b"".join(chunks).replace(b"\r\n", b"\n").decode("utf-8", "surrogateescape")
    return proc.returncode, out, err.decode("utf-8", "surrogateescape")
