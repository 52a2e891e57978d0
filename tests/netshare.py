"""A real network filesystem for the tests: sshfs over loopback, with latency.

The rig (docs/network-shares.md, "How it is tested"):

* a private network, mount and PID namespace (`unshare -n -m -p -f
  --kill-child`, as root) holding only `lo`, so nothing listens on the
  machine's own interfaces and nothing outlives the rig: when its first
  process (this module's `serve`, PID 1 there) ends, the kernel kills every
  process of the namespace — sshd, the proxy, every sshfs — and the mount
  namespace with its FUSE mounts goes with them;
* a throwaway sshd on a high loopback port (its own host key and client key,
  generated per rig), serving `internal-sftp`;
* a small delaying TCP proxy (asyncio, in the same process) between sshfs
  and sshd that holds every chunk DELAY_MS before passing it on, each way:
  a round trip costs ~2 ms more, like a share on a nearby server;
* sshfs mounts of one export folder ("the server's disk", an ordinary folder
  the test changes directly): two mounts of it stand in for two hosts.

Everything here is bounded: every wait has a deadline, the proxy accepts a
limited number of connections and stops itself after LIFETIME_S, and the
pytest fixtures tear the rig down even when the test fails. Where root,
FUSE, sshfs, sshd, unshare or nsenter are missing the fixtures skip with one
line saying which.

Processes that must see the mounts (ctindex, `find`) run inside the mount
namespace through `Rig.run` (`nsenter --mount --net`); the export folder is
visible from everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SSHD_PORT = 42022  # inside the private network namespace: no clash possible
PROXY_PORT = 42023
DELAY_MS = 1.0  # added by the proxy in each direction
# The rig stops itself after this long, whatever happens (a long soak sets
# CTINDEX_RIG_LIFETIME_S: tests/e2e/test_netshare_soak.py, `nox -s share-soak`).
LIFETIME_S = float(os.environ.get("CTINDEX_RIG_LIFETIME_S", "1800"))
MAX_CONNECTIONS = 64
START_TIMEOUT_S = 20.0
MOUNT_TIMEOUT_S = 20.0
MOUNT_ATTEMPTS = 3  # a connection dropped while sshd is loaded
COMMAND_TIMEOUT_S = 300.0
# Mount options that remove client-side caching (docs/network-shares.md):
# sshfs's own directory cache and the kernel's FUSE attribute/entry caches.
NO_CACHE = ("dir_cache=no", "attr_timeout=0", "entry_timeout=0", "negative_timeout=0")
TOOLS = ("sshfs", "nsenter", "unshare", "ssh-keygen", "fusermount3")


class RigUnavailable(Exception):
    """The machine cannot host the rig (the fixtures skip with this line)."""


def unavailable() -> str | None:
    """Why the rig cannot run here, or None."""
    if sys.platform != "linux":
        return f"network-share rig needs Linux, not {sys.platform}"
    if os.geteuid() != 0:
        return "network-share rig needs root (unshare, mount)"
    if not os.path.exists("/dev/fuse"):
        return "network-share rig needs /dev/fuse"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"network-share rig needs {tool} (Debian: sshfs, openssh-server)"
    if not os.path.exists("/usr/sbin/sshd"):
        return "network-share rig needs /usr/sbin/sshd (Debian: openssh-server)"
    return None


@dataclass
class Rig:
    """The pytest side: one namespace with sshd, the proxy and the mounts."""

    work: Path
    proc: subprocess.Popen[bytes] | None = None
    pid: int = 0  # the serving process, as this (outer) PID namespace numbers it
    mounts: dict[str, Path] = field(default_factory=dict)

    @property
    def export(self) -> Path:
        return self.work / "export"

    def start(self) -> Rig:
        why = unavailable()
        if why:
            raise RigUnavailable(why)
        self.work.mkdir(parents=True, exist_ok=True)
        self.export.mkdir(exist_ok=True)
        key = self.work / "client_key"
        for path in (key, self.work / "host_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                check=True,
                capture_output=True,
                timeout=30,
            )
        (self.work / "authorized_keys").write_bytes((self.work / "client_key.pub").read_bytes())
        ready = self.work / "ready.json"
        self.proc = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--pid",
                "--fork",
                "--kill-child",
                "--propagation",
                "private",
                sys.executable,
                "-m",
                "tests.netshare",
                "serve",
                str(self.work),
            ],
            cwd=Path(__file__).resolve().parent.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.work / "rig.log", "wb"),  # noqa: SIM115
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.work / "rig.log").read_text(errors="replace").strip()
                self.close()
                raise RigUnavailable(
                    "network-share rig did not start: "
                    + (log.splitlines()[-1] if log else "no output")
                )
            time.sleep(0.02)
        self.pid = int(json.loads(ready.read_text())["pid"])
        return self

    def nsenter(self, *, pid_ns: bool = False) -> list[str]:
        flags = ["--mount", "--net"] + (["--pid"] if pid_ns else [])
        # Entering a mount namespace resets the working folder to its root:
        # keep ours, so `python -m ctindex` runs the checkout under test.
        return ["nsenter", "--target", str(self.pid), *flags, f"--wd={os.getcwd()}", "--"]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = COMMAND_TIMEOUT_S,
        env: dict[str, str] | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command that sees the mounts (inside the mount namespace)."""
        return subprocess.run(
            [*self.nsenter(), *argv],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
            env=env,
            check=check,
        )

    def mount(
        self,
        name: str,
        *,
        options: Sequence[str] = NO_CACHE,
        read_only: bool = False,
        user: str = "root",
    ) -> Path:
        """Mount the export at work/<name> through the delaying proxy, logged
        in on the server as `user` (its files are made as that user; the
        work folder must be one `user` can enter)."""
        point = self.work / name
        point.mkdir(exist_ok=True)
        opts = [
            f"port={PROXY_PORT}",
            f"IdentityFile={self.work / 'client_key'}",
            "StrictHostKeyChecking=no",
            "UserKnownHostsFile=/dev/null",
            "BatchMode=yes",
            "LogLevel=ERROR",
            "ConnectTimeout=10",
            "ServerAliveInterval=5",
            *options,
        ]
        if read_only:
            opts.append("ro")
        # In the rig's PID namespace: this sshfs dies with the rig. A
        # connection the loaded machine's sshd drops before it is set up
        # ("reset by peer") is tried again, within the same bound.
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        for attempt in range(MOUNT_ATTEMPTS):
            done = subprocess.run(
                [
                    *self.nsenter(pid_ns=True),
                    "sshfs",
                    "-o",
                    ",".join(opts),
                    f"{user}@127.0.0.1:{self.export}",
                    str(point),
                ],
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
                check=False,
            )
            dropped = "reset by peer" in done.stderr or "closed by remote" in done.stderr
            if done.returncode == 0 or not dropped or attempt + 1 == MOUNT_ATTEMPTS:
                break
        if done.returncode != 0:
            raise RuntimeError(f"sshfs mount failed: {done.stderr.strip()}")
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not self.is_mounted(point):
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshfs mount of {point} did not appear")
            time.sleep(0.02)
        self.mounts[name] = point
        return point

    def umount(self, name: str) -> None:
        point = self.mounts.pop(name)
        self.run(["fusermount3", "-u", str(point)], timeout=MOUNT_TIMEOUT_S, check=True)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while self.is_mounted(point):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{point} is still mounted")
            time.sleep(0.02)

    def is_mounted(self, point: Path) -> bool:
        from ctindex.backends.mounts import read_mounts

        try:
            table = read_mounts(f"/proc/{self.pid}/mountinfo")
        except OSError:
            return False
        return any(m.mount_point == str(point) and m.fstype == "fuse.sshfs" for m in table)

    def close(self) -> None:
        """End the namespace: everything in it dies with its first process."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            # The serving process unmounts and stops sshd on SIGTERM; unshare
            # itself only waits for it (and kills it if unshare dies).
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM) if self.pid else proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()  # --kill-child: the namespace's PID 1 dies with it
                proc.wait(timeout=10)


def rig_for_test(work: Path) -> Iterator[Rig]:
    """The tests' fixture body: a started rig, torn down afterwards even
    when the test fails; pytest.skip with the one line when it cannot start."""
    import pytest

    r = Rig(work)
    try:
        r.start()
    except RigUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield r
    finally:
        r.close()


# The environment of ctindex run by these tests: no CI switch (it would keep
# the share host's daemon from starting), no forced watching.
HOST_ENV = {k: v for k, v in os.environ.items() if k not in ("CI", "CTINDEX_WATCH")}


def host_ctindex(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ctindex on the share's host: outside the rig, where the folder is local."""
    return subprocess.run(
        [sys.executable, "-m", "ctindex", "-C", str(root), *args],
        capture_output=True,
        text=True,
        env=HOST_ENV,
        timeout=120,
    )


@contextlib.contextmanager
def rig(work: Path) -> Iterator[Rig]:
    r = Rig(work)
    try:
        yield r.start()
    finally:
        r.close()


# -- inside the namespace ----------------------------------------------------------


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    delay: float,
    source: socket.socket | None,
) -> None:
    """Copy one direction, each chunk held `delay` seconds (order kept)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    sender = asyncio.create_task(send())
    try:
        while True:
            if source is not None:
                # ACK at once: a delayed ACK would hold the sender's next small
                # write behind Nagle's rule for milliseconds (ssh leaves Nagle
                # on for sftp), far more than the latency being simulated.
                with contextlib.suppress(OSError):
                    source.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            data = await reader.read(65536)
            await queue.put((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()


async def _proxy(delay: float, lifetime: float, listening: Callable[[], None]) -> None:
    active = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal active
        if active >= MAX_CONNECTIONS:
            writer.close()
            return
        active += 1
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", SSHD_PORT), 10)
            down_sock = writer.get_extra_info("socket")
            up_sock = up_w.get_extra_info("socket")
            await asyncio.gather(
                _pipe(reader, up_w, delay, down_sock),
                _pipe(up_r, writer, delay, up_sock),
                return_exceptions=True,
            )
            up_w.close()
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            active -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", PROXY_PORT)
    listening()  # only now may a mount be tried (`serve` writes ready.json)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), lifetime)


def _wait_port(port: int, deadline: float) -> None:
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def serve(work: Path) -> int:
    """PID 1 of the rig's namespaces: lo, sshd, the proxy; then wait."""
    deadline = time.monotonic() + START_TIMEOUT_S
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
    config = work / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {SSHD_PORT}",
                "ListenAddress 127.0.0.1",
                f"HostKey {work / 'host_key'}",
                f"AuthorizedKeysFile {work / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PidFile none",
                "Subsystem sftp internal-sftp",
                "LogLevel ERROR",
                "MaxStartups 64",
                "MaxSessions 64",
                "",
            ]
        )
    )
    sshd = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL
    )
    try:
        _wait_port(SSHD_PORT, deadline)

        def ready() -> None:
            # The outer PID of this process: /proc is the host's (no --mount-proc).
            host_pid = int(os.readlink("/proc/self"))
            tmp = work / "ready.json.tmp"
            tmp.write_text(json.dumps({"pid": host_pid}))
            os.replace(tmp, work / "ready.json")

        asyncio.run(_proxy(DELAY_MS / 1000, LIFETIME_S, ready))
    finally:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split(" ")[4]
            if point.startswith(str(work) + "/") and "fuse.sshfs" in line:
                subprocess.run(["fusermount3", "-u", "-z", point], timeout=10, check=False)
        sshd.terminate()
        try:
            sshd.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sshd.kill()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(Path(sys.argv[2])))
    print("usage: python -m tests.netshare serve WORKDIR", file=sys.stderr)
    sys.exit(2)
