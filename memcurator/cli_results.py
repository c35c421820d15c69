"""Helpers of the CLI's results-folder commands (bench, report): lock, interrupt, Ctrl-C.

Kept out of ``cli.py`` so that the commands there stay short.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memcurator.cli_common import fail
from memcurator.files import LOCK_NAME, FolderLock, FolderLocked

#: files whose presence means a folder already holds results
RESULT_FILES = ("summary.json", "records.csv")


def lock_results(
    out_dir: Path, overwrite: bool, what: str = "memcurator bench", *, resume: bool = False
) -> FolderLock:
    """Lock ``out_dir`` for one writer and check it holds no results (unless ``overwrite`` or
    ``resume``).

    The caller releases the lock when done; should it not (an unexpected error), it is released
    at interpreter exit, and a lock left by a killed process is taken over by the next run.
    Exits with code 2 and a one-line message when another live process holds the folder, or
    when it already holds results and neither ``overwrite`` nor ``resume`` is set.
    """
    import atexit

    lock = FolderLock(out_dir, what)
    try:
        lock.acquire()
    except FolderLocked as e:
        fail(e)
    atexit.register(lock.release)
    if not (overwrite or resume) and any((out_dir / f).exists() for f in RESULT_FILES):
        lock.release()
        fail(
            f"{str(out_dir)!r} already holds benchmark results; pass --resume to continue an "
            "interrupted bench there, --overwrite to replace them, or choose another --out"
        )
    return lock


def saved_runs(out_dir: Path) -> int | None:
    """``runs_done`` of the ``summary.json`` on disk, or None when there is none (or unreadable)."""
    try:
        doc = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
        return int(doc["config"]["runs_done"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def interrupted_message(
    out_dir: Path, n_runs: int, lock: FolderLock, *, resumable: bool = True
) -> str:
    """What an interrupted bench tells the user, read from what is on disk; drops the lock.

    A folder this run created and left empty is removed, and the message says nothing was saved.
    Otherwise it says how to finish the run: ``--resume`` (``resumable``), else ``--overwrite``.
    """
    done = saved_runs(out_dir)
    lock.release()
    if not done:
        if lock.created_folder:
            with contextlib.suppress(OSError):
                for p in out_dir.iterdir():  # only our own leftovers: temporary files
                    if p.name.startswith(".") and p.name.endswith(".tmp"):
                        p.unlink()
                out_dir.rmdir()
        where = f"{out_dir} was not created" if not out_dir.exists() else f"{out_dir} is unchanged"
        return (
            f"[yellow]interrupted[/yellow]: no (policy, seed) run had finished, so nothing was "
            f"saved ({where})"
        )
    how = (
        "run the same command with --resume to finish it"
        if resumable
        else "run it again with --overwrite to start over"
    )
    return (
        f"[yellow]interrupted[/yellow]: {done} of {n_runs} (policy, seed) runs were finished and "
        f"are saved in {out_dir} (summary.json marks the folder incomplete); {how}"
    )


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) for the duration of the block, then deliver it.

    Only in the main thread (elsewhere signals cannot be handled, and the block runs as is).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[Any] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append((signum, frame))

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if pending:
            raise KeyboardInterrupt


__all__ = [
    "LOCK_NAME",
    "interrupted_message",
    "lock_results",
    "saved_runs",
    "sigint_deferred",
]
