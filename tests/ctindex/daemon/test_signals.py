"""The loop's wake-up socket (ctindex/daemon/signals.py)."""

from __future__ import annotations

import os
import selectors
import signal

from ctindex.daemon.signals import SignalWake


def test_signal_wakes_the_selector_and_names_the_stop() -> None:
    reasons: list[str] = []
    wake = SignalWake(reasons.append)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    sel = selectors.DefaultSelector()
    try:
        wake.install()
        sel.register(wake.socket, selectors.EVENT_READ, "wake")
        os.kill(os.getpid(), signal.SIGHUP)
        assert [k.data for k, _ in sel.select(5.0)] == ["wake"]
        assert reasons == ["signal SIGHUP"]
        wake.drain()
        assert sel.select(0) == []
        wake.poke()  # the query worker's wake-up
        assert [k.data for k, _ in sel.select(5.0)] == ["wake"]
    finally:
        sel.close()
        wake.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
