"""Real Unix users made for one test (root only): the second-user tests of
the store path (tests/e2e/test_robust_store_path.py) and of a share used by
a team (tests/e2e/test_netshare_users.py). Test code only."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OTHER_USER_RUN = r"""
import site, sys
site.addsitedir(sys.argv[1])
from ctindex.cli import main
sys.exit(main(sys.argv[2:]))
"""


class OtherUser:
    """A Unix user (and a group it belongs to) made for one test, removed after."""

    def __init__(self, name: str, group: str, python: str) -> None:
        import grp
        import pwd

        self.name = name
        self.uid = pwd.getpwnam(name).pw_uid
        self.group = group
        self.gid = grp.getgrnam(group).gr_gid
        self.python = python

    def argv(self, *argv: str) -> list[str]:
        """`argv` run as this user, with a plain environment (`runuser`)."""
        env = ["PATH=" + os.environ.get("PATH", "/usr/bin:/bin"), "HOME=/tmp", "LANG=C.UTF-8"]
        return ["runuser", "-u", self.name, "--", "env", "-i", *env, *argv]

    def run(self, *argv: str, cwd: Path | None = None) -> Any:
        return subprocess.run(
            self.argv(*argv), capture_output=True, text=True, timeout=120, check=False, cwd=cwd
        )

    def cannot_import(self) -> str | None:
        """None when this user can import ctindex and what it needs from this
        venv; else the last line of the error."""
        import sysconfig

        probe = "import site, sys; site.addsitedir(sys.argv[1]); import ctindex.cli, Stemmer, yaml"
        site_dir = sysconfig.get_paths()["purelib"]
        done = self.run(self.python, "-B", "-c", probe, site_dir)  # as ctindex() runs
        lines = done.stderr.strip().splitlines()
        return None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")

    def ctindex(self, root: Path, *args: str) -> Any:
        import sysconfig

        site_dir = sysconfig.get_paths()["purelib"]  # this venv's packages
        return self.run(self.python, "-B", "-c", OTHER_USER_RUN, site_dir, "-C", str(root), *args)

    def console(self, root: Path, *args: str) -> Any:
        """`python -m ctindex` as this user, the query fast path included."""
        return self.run(*self.console_argv(root, *args))

    def console_argv(self, root: Path, *args: str) -> list[str]:
        """`python -m ctindex` with the checkout and this venv's packages on
        PYTHONPATH, so that a daemon it starts (`python -m ctindex.daemon`,
        same environment) imports them too. Run it with `argv`."""
        import sysconfig

        from tests.conftest import REPO

        path = os.pathsep.join((str(REPO), sysconfig.get_paths()["purelib"]))
        return [
            "env",
            f"PYTHONPATH={path}",
            "PYTHONDONTWRITEBYTECODE=1",
            self.python,
            "-m",
            "ctindex",
            "-C",
            str(root),
            *args,
        ]


def interpreter_for(name: str) -> str | None:
    """A Python of this version the user can run: this one, else the system's
    (this one may live in a folder only its owner can enter, e.g. /root)."""
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (sys.executable, os.path.realpath(sys.executable), f"/usr/bin/python{want}"):
        done = subprocess.run(
            [
                "runuser",
                "-u",
                name,
                "--",
                candidate,
                "-c",
                "import sys; print('%d.%d' % sys.version_info[:2])",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip() == want:
            return candidate
    return None


def unavailable() -> str | None:
    """Why users cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root to add a Unix user"
    tools = ("useradd", "userdel", "groupadd", "groupdel", "runuser")
    if any(shutil.which(t) is None for t in tools):
        return "useradd/groupadd/runuser missing"
    return None


@contextlib.contextmanager
def made_users(names: list[str], group: str, *, login: bool = False) -> Iterator[list[OtherUser]]:
    """Users `names`, members of a new `group`, removed afterwards with every
    process they left. `login`: sshd may log them in (an unlocked account
    with a shell; the rig's sshd checks no password). Raises LookupError
    when they cannot run this checkout's Python (the caller skips)."""
    for name in names:  # left by a run that was killed before its cleanup: made again
        subprocess.run(["userdel", name], check=False, capture_output=True)
    subprocess.run(["groupdel", group], check=False, capture_output=True)
    subprocess.run(["groupadd", group], check=True, capture_output=True)
    made: list[str] = []
    try:
        shell = "/bin/sh" if login else "/usr/sbin/nologin"
        for name in names:
            subprocess.run(
                ["useradd", "-M", "-N", "-G", group, "-s", shell, name],
                check=True,
                capture_output=True,
            )
            made.append(name)
            if login:  # "!" (locked) is refused by sshd without PAM; "*" only has no password
                subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True)
        users = []
        for name in names:
            python = interpreter_for(name)
            if python is None:
                raise LookupError("no Python of this version that another user can run")
            user = OtherUser(name, group, python)
            why_not = user.cannot_import()
            if why_not is not None:  # this venv or checkout lies in a folder only root enters
                raise LookupError(f"the other user cannot import ctindex from here: {why_not}")
            users.append(user)
        yield users
    finally:
        for name in made:
            end_processes_of(name)  # a daemon it started: userdel refuses a user in use
            subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", group], check=False, capture_output=True)


def end_processes_of(name: str) -> None:
    """Kill, by pid, every process of the throwaway user `name` (made for
    this test only, so all of them were started by this test)."""
    import pwd

    import psutil

    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    procs = [
        p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid
    ]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=10)
