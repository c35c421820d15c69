"""The API fuzzed from its own OpenAPI document (schemathesis): no 500, every error a problem.

Bounded: a few examples per operation, no deadline (2 shared CPU cores), in process over ASGI.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")

from _service_util import SQL_A, app_for, make_keys  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# built at import: schemathesis parametrizes from a schema object (its from_fixture does not
# work with this pytest); the store lives in a temporary folder removed at the module's end
_DIR = tempfile.mkdtemp(prefix="memcurator-fuzz-")
_KEYS = make_keys()
_APP = app_for(Path(_DIR), _KEYS)
with TestClient(_APP) as _c:  # something to find, update and forget
    _c.post("/v1/write", json={"text": SQL_A}, headers=_KEYS.h("a"))
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    _APP.state.pool.close()
    shutil.rmtree(_DIR, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_makes_the_server_fail(case: Any) -> None:
    r = case.call(headers=_KEYS.h("a"))
    assert r.status_code < 500, (case.method, case.path, r.status_code, r.text[:500])
    if r.status_code >= 400:
        ct = r.headers["content-type"]  # schemathesis keeps each header as a list
        ct = ct[0] if isinstance(ct, list) else ct
        assert ct.startswith("application/problem+json"), r.text[:300]
        assert "Traceback" not in r.text
