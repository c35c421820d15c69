"""Shared set-up of the tests that start another process: a free port, a clean stop, a fresh
interpreter."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate ``proc``; kill it when it has not exited 20 s later."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def run_python(
    code: str, *, hide: tuple[str, ...] = (), timeout: float = 120, cwd: Any = None
) -> str:
    """Run ``code`` in a fresh interpreter (in folder ``cwd``) in which the modules ``hide``
    cannot be imported (as when their package is not installed); assert that it exits 0
    (showing its stderr when not) and return its stdout."""
    pre = "".join(f"import sys; sys.modules[{m!r}] = None\n" for m in hide)
    cmd = [sys.executable, "-c", pre + code]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout
