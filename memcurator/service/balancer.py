"""Several ``memcurator serve`` replicas behind Debian's haproxy, on loopback (tests, benchmarks).

:class:`Replicas` starts N :class:`~memcurator.service.launch.ServeProcess` children on one
store (their shared state is the store's backend, :mod:`memcurator.service.state`) and one
``haproxy`` in front of them: round robin, a ``/healthz`` check every 0.5 s (a replica is out
after 2 failures), and a request whose connection failed retried on another replica
(``retry-on conn-failure empty-response``, ``option redispatch``, the request buffered whole
so that it can be sent again). :func:`haproxy_config` is
the configuration it writes (docs/service.md shows one).

Examples
--------
>>> print(haproxy_config(8080, [8001, 8002]).splitlines()[-1])  # doctest: +NORMALIZE_WHITESPACE
    server r1 127.0.0.1:8002 check
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memcurator.errors import StoreError
from memcurator.service.launch import ServeProcess, free_port

#: where Debian's package puts it
HAPROXY = "/usr/sbin/haproxy"


def haproxy_config(port: int, backends: Sequence[int], host: str = "127.0.0.1") -> str:
    """An haproxy configuration that balances ``host:port`` over the replicas on ``backends``.

    Parameters
    ----------
    port : int
        Where the balancer listens.
    backends : sequence of int
        The replicas' ports (on ``host``).
    host : str, default "127.0.0.1"

    Returns
    -------
    str
    """
    lines = [
        "global",
        "    maxconn 1024",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    retries 3",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response",
        "    option http-buffer-request",  # the whole request kept: it can be sent again
        "frontend memcurator",
        f"    bind {host}:{port}",
        "    default_backend replicas",
        "    http-response set-header X-Replica %s",  # which replica answered
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk GET /healthz",
        "    http-check expect status 200",
        "    default-server inter 500ms fall 2 rise 1",
    ]
    lines += [f"    server r{i} {host}:{p} check" for i, p in enumerate(backends)]
    return "\n".join(lines) + "\n"


def _wait_port(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


class Replicas:
    """N replicas of ``memcurator serve STORE`` and an haproxy in front, on ``127.0.0.1``.

    Parameters
    ----------
    store : str
        The store (a SQLite path or a ``postgresql://`` URL).
    n : int
        Replicas.
    keys : str, optional
        ``--keys`` of every replica (None: the default; a PostgreSQL store's database).
    folder : str or Path, optional
        Where the configuration and logs go (default: a new temporary folder, removed by
        :meth:`stop`).
    args : sequence of str
        Further ``serve`` options.

    Attributes
    ----------
    url : str
        The balancer's URL.
    servers : list of ServeProcess
        The replicas (``servers[i].url`` reaches one directly).

    Raises
    ------
    StoreError
        From :meth:`start`: haproxy missing or not listening, or a replica that did not start.
    """

    def __init__(
        self,
        store: str,
        n: int,
        *,
        keys: str | None = None,
        folder: str | Path | None = None,
        args: Sequence[str] = (),
    ):
        self._own = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="mc-replicas-") if folder is None else folder)
        self.servers = [
            ServeProcess(store, keys=keys, log_path=str(self.folder / f"r{i}.log"), args=args)
            for i in range(n)
        ]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Replicas:
        """Start the replicas (together) and the balancer; return once all answer."""
        if not Path(HAPROXY).exists():
            raise StoreError(f"{HAPROXY} is missing: apt-get install haproxy")
        with ThreadPoolExecutor(len(self.servers)) as ex:
            list(ex.map(lambda s: s.start(), self.servers))
        cfg = self.folder / "haproxy.cfg"
        cfg.write_text(haproxy_config(self.port, [s.port for s in self.servers]))
        log = open(self.folder / "haproxy.log", "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(cfg)], stdout=log, stderr=log)
        log.close()
        if not _wait_port(self.port, 20.0):
            self.stop()
            raise StoreError(f"haproxy did not listen on {self.url}: see {self.folder}")
        return self

    def stop(self) -> None:
        """Stop the balancer and every replica (and remove a folder of its own)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for s in self.servers:
            s.stop()
        if self._own:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["HAPROXY", "Replicas", "haproxy_config"]
