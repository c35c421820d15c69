"""``memcurator serve`` as a child process: start it on a free loopback port, wait until it
answers, stop it politely or kill it (``SIGKILL``), and start it again on the same store.

For the benchmarks and tests that need a real server (its own process, uvicorn, a TCP socket)
rather than the ASGI app in process: the load and concurrency benchmarks, and the test that
kills the server mid-write and checks that nothing acknowledged is lost.

Examples
--------
>>> with ServeProcess("/tmp/store.db", keys="/tmp/store.db.keys") as srv:  # doctest: +SKIP
...     Client(srv.url, key=token).write("Task: t\\nAction: a")
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from memcurator.errors import StoreError

#: seconds a (re)started server has to answer ``/healthz``
START_S = 120.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """One ``memcurator serve STORE`` child process on ``127.0.0.1``.

    Parameters
    ----------
    store : str
        The store to serve (a SQLite path or a ``postgresql://`` URL).
    keys : str or None
        The key file (``memcurator keys create --keys``); None: the default (``<store>.keys``,
        or the database of a ``postgresql://`` store).
    port : int, optional
        TCP port; None picks a free one. A restart keeps it, so clients keep their URL.
    log_path : str, optional
        Where the server's stdout and stderr go (appended across restarts); None: dropped.
    log_level : str, default "warning"
        uvicorn's log level.
    args : sequence of str, default ()
        Further ``memcurator serve`` options (e.g. ``["--recall-in-store"]``).

    Raises
    ------
    StoreError
        From :meth:`start`: the server exited or did not answer within :data:`START_S`
        seconds (the end of its log is in the message).
    """

    def __init__(
        self,
        store: str,
        *,
        keys: str | None,
        port: int | None = None,
        log_path: str | None = None,
        log_level: str = "warning",
        args: Sequence[str] = (),
    ):
        self.store = store
        self.keys = keys
        self.port = free_port() if port is None else port
        self.log_path = log_path
        self.log_level = log_level
        self.args = list(args)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        #: how many times the server was started
        self.starts = 0

    def start(self, timeout_s: float = START_S) -> ServeProcess:
        """Start the server and return once ``/healthz`` answers."""
        import httpx

        if self.proc is not None and self.proc.poll() is None:
            raise StoreError(f"the server on {self.url} is running already")
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memcurator.cli", "serve", self.store]
                + ([] if self.keys is None else ["--keys", self.keys])
                + ["--host", "127.0.0.1", "--port", str(self.port)]
                + ["--log-level", self.log_level]
                + self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()  # type: ignore[union-attr]
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise StoreError(f"memcurator serve did not start on {self.url}: {self.log()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """``SIGKILL`` the server (no shutdown handler runs) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 20.0) -> None:
        """``SIGTERM``, then ``SIGKILL`` if it has not exited within ``timeout_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self, tail: int = 3000) -> str:
        """The end of the server's log (empty when it is not kept)."""
        if not self.log_path:
            return ""
        try:
            return Path(self.log_path).read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["START_S", "ServeProcess", "free_port"]
