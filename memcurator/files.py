"""Files that cannot be lost or half-written: atomic writes, strict JSON, a folder lock.

Every file memcurator writes (results, plots, reports, exports) goes through
:func:`atomic_open`: the bytes go to a temporary name in the same folder, are flushed to disk,
and only then replace the target with :func:`os.replace`, so a reader (or a crash, or Ctrl-C)
sees the old file or the new one, never a part of one. Every JSON document goes through
:func:`dumps_strict`: NaN and infinities become ``null``, which strict parsers accept.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from memcurator.errors import MemcuratorError

LOCK_NAME = ".memcurator.lock"


class FolderLocked(MemcuratorError, RuntimeError):
    """A results folder is in use by another live memcurator process."""


def json_safe(x: Any) -> Any:
    """Return ``x`` with NaN and infinities (in nested dicts, lists, tuples) replaced by None.

    Examples
    --------
    >>> json_safe({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x


def dumps_strict(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN`` or ``Infinity`` (they become ``null``).

    Parameters
    ----------
    obj : Any
        JSON-able value; objects json cannot encode are written with ``str`` (``default=str``).
    **kw
        Passed to :func:`json.dumps` (``indent``, ``sort_keys``, ...).

    Examples
    --------
    >>> dumps_strict({"score": float("nan"), "n": 3})
    '{"score": null, "n": 3}'
    """
    kw.setdefault("default", str)
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kw: Any) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on a clean exit it replaces ``path`` atomically.

    On an exception (KeyboardInterrupt included) the temporary file is removed and ``path`` keeps
    its previous content.

    Parameters
    ----------
    path : path-like
        The file to (re)write; its folder must exist.
    mode : {"w", "wb"}
        Text (UTF-8, unless ``encoding`` is given) or binary.
    **kw
        Passed to :func:`open` (``newline``, ``encoding``).

    Raises
    ------
    ValueError
        ``mode`` is not ``"w"`` or ``"wb"``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_open(p) as f:
    ...     _ = f.write("hello")
    >>> p.read_text()
    'hello'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', got {mode!r}")
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    if mode == "w":
        kw.setdefault("encoding", "utf-8")
    try:
        with os.fdopen(fd, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; returns ``path`` as a Path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return Path(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class FolderLock:
    """An exclusive lock on a results folder, held by one process at a time.

    The lock is a file ``.memcurator.lock`` holding the owner's pid, host and start time. It is
    created with a hard link from a fully written temporary file, so it is never seen half
    written. A lock whose pid no longer runs on this host is stale (a killed process) and is
    taken over.

    Parameters
    ----------
    folder : path-like
        The results folder; created if missing.
    what : str, default "memcurator"
        Names the holder in the lock file and in messages (e.g. ``"memcurator bench"``).

    Raises
    ------
    FolderLocked
        From :meth:`acquire`: another live process holds the folder.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with FolderLock(d) as lock:
    ...     FolderLock(d).acquire()
    Traceback (most recent call last):
    ...
    memcurator.files.FolderLocked: ...
    """

    def __init__(self, folder: str | os.PathLike[str], what: str = "memcurator"):
        self.folder = Path(folder)
        self.what = what
        self.path = self.folder / LOCK_NAME
        self.created_folder = False
        self._held = False

    def _holder(self) -> dict[str, Any] | None:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def acquire(self) -> FolderLock:
        """Take the lock (taking over a stale one); returns self."""
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            self.created_folder = True
        host = socket.gethostname()
        me = {"pid": os.getpid(), "host": host, "what": self.what, "started": time.time()}
        for _ in range(5):
            fd, tmp = tempfile.mkstemp(prefix=".lock.", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(json.dumps(me))
                os.link(tmp, self.path)  # fails if the lock exists: atomic test-and-set
                self._held = True
                return self
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            holder = self._holder()
            if holder is None:
                continue  # released meanwhile: try again
            pid = holder.get("pid")
            stale = (
                isinstance(pid, int)
                and holder.get("host") == host
                and not _pid_alive(pid)
                and pid != os.getpid()
            )
            if not stale:
                since = holder.get("started")
                when = (
                    time.strftime(" since %H:%M:%S", time.localtime(since))
                    if isinstance(since, int | float)
                    else ""
                )
                raise FolderLocked(
                    f"{str(self.folder)!r} is in use by another {holder.get('what', 'process')} "
                    f"(pid {pid} on {holder.get('host', '?')}{when}); choose another --out, or "
                    f"wait for it to finish (merge folders afterwards with memcurator report). "
                    f"If no such process runs, delete {self.path}"
                )
            if self._holder() == holder:  # still the same stale holder, not a new live one
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()  # stale: its process is gone
        raise FolderLocked(f"could not take the lock {self.path} (it keeps changing hands)")

    def release(self) -> None:
        """Drop the lock if this object holds it."""
        if self._held:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self._held = False

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
