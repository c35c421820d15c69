"""Several OS processes on one namespace of each backend (issue 20): no lost or duplicated
write, no error, the budget held after every write, the decision-log replay equal to the
resident set, and no forgotten entry returned by a recall that began after the forget.

The harness is ``benchmarks/concurrency.py`` (which prints the large run's table); here it runs
small: 4 processes x 200 mixed operations.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import concurrency  # noqa: E402


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_processes_share_one_namespace(backend: str, store_target: Callable[[str], str]) -> None:
    target = store_target(backend)
    rep = concurrency.run(target, procs=4, ops=200, max_bytes=40_000, seed=1)
    assert rep.problems == []
    assert rep.admitted > 100 and rep.evicted > 0 and rep.forgotten > 0  # it did contend
    assert 0 < rep.max_used <= rep.max_bytes


@pytest.mark.parametrize(("backend", "servers"), [("sqlite", 1), ("sqlite", 2), ("postgres", 1)])
def test_api_clients_share_one_namespace(
    backend: str, servers: int, store_target: Callable[[str], str]
) -> None:
    """The same mix through ``memcurator serve`` (issue 21): 4 client processes x 100 requests,
    on one server or on two server processes over the same store; the same verifier, plus no
    error answer (no 5xx) and no traceback in a server log."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    target = store_target(backend)
    rep = concurrency.run(
        # 12 KB binds at the default (binary) precision a served namespace is created with
        target, procs=4, ops=100, max_bytes=12_000, seed=2, api=True, servers=servers
    )
    assert rep.problems == []
    assert rep.backend.endswith(f"api/{servers}srv")
    assert rep.admitted > 150 and rep.evicted > 0 and rep.forgotten > 0  # it did contend
    assert 0 < rep.max_used <= rep.max_bytes
