"""ctindex/ipc/peer.py's peer checks by feature: SO_PEERCRED, else
getpeereid(3), else none (the daemon disabled, never a traceback)."""

from __future__ import annotations

import ctypes
import errno
import socket
from collections.abc import Iterator

import pytest

from ctindex.ipc import peer
from ctindex.ipc.peer import no_peer_check, peer_is_owner, peer_uid
from ctindex.reconciler import platform_features


@pytest.fixture
def no_peercred(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(platform_features.SIMULATE_ENV, "no-peercred")
    platform_features.reset()
    yield
    monkeypatch.delenv(platform_features.SIMULATE_ENV)
    platform_features.reset()


def test_so_peercred_names_our_uid() -> None:
    if not platform_features.has_peercred():
        pytest.skip("no SO_PEERCRED here")
    a, b = socket.socketpair()
    with a, b:
        assert no_peer_check() is None
        assert peer_is_owner(a)


def test_getpeereid_is_called_with_its_documented_signature(
    no_peercred: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in with getpeereid(int fd, uid_t *uid, gid_t *gid)'s contract:
    # what the ctypes call hands over must be writable 32-bit cells.
    calls: list[int] = []

    def fake(fd: int, uid: object, gid: object) -> int:
        calls.append(fd)
        ctypes.cast(uid, ctypes.POINTER(ctypes.c_uint32)).contents.value = 4242
        ctypes.cast(gid, ctypes.POINTER(ctypes.c_uint32)).contents.value = 7
        return 0

    monkeypatch.setattr(peer, "_peereid", [fake])
    a, b = socket.socketpair()
    with a, b:
        assert no_peer_check() is None
        assert peer_uid(a) == 4242
        assert calls == [a.fileno()]


def test_getpeereid_failure_is_an_oserror(
    no_peercred: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer, "_peereid", [lambda fd, uid, gid: -1])
    monkeypatch.setattr(ctypes, "get_errno", lambda: errno.ENOTCONN)
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(OSError) as got:
            peer_uid(a)
        assert got.value.errno == errno.ENOTCONN
        assert not peer_is_owner(a)


def test_without_any_mechanism_the_daemon_is_disabled_with_a_reason(
    no_peercred: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer, "_peereid", [None])
    assert no_peer_check() == (
        "daemon disabled: no peer credential check on this platform (SO_PEERCRED, getpeereid)"
    )
    a, b = socket.socketpair()
    with a, b:
        assert not peer_is_owner(a)  # no proof, no service
