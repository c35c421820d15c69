import sqlite3

import pytest

from memcurator.errors import InvalidInput, LLMError, StoreError
from memcurator.llm import CachedExecutor, Usage
from memcurator.llm.base import Completion
from memcurator.llm.fake import ScriptedExecutor


class Slow:
    """A deterministic executor whose calls report a measured latency and a cost."""

    name = "slow"
    model_id = "slow-1"

    def __init__(self, temperature=0.0):
        self.temperature = temperature
        self.calls = 0

    def complete(self, prompt, *, max_tokens=128, stop=None):
        self.calls += 1
        return Completion(prompt[::-1][:max_tokens], 7, 3, 1.25, 0.002, "slow-1")


def test_hit_returns_original_cost_and_counts(tmp_path):
    inner = Slow()
    ex = CachedExecutor(inner, tmp_path / "c.sqlite")
    first = ex.complete("abc", max_tokens=8)
    second = ex.complete("abc", max_tokens=8)
    assert first.cached is False and second.cached is True
    assert (second.text, second.tokens_in, second.tokens_out) == ("cba", 7, 3)
    assert (second.latency_s, second.cost_usd, second.model) == (1.25, 0.002, "slow-1")
    assert inner.calls == 1 and (ex.hits, ex.misses) == (1, 1)
    usage = Usage()
    usage.add(first)
    usage.add(second)
    assert usage.latency_s == 2.5 and usage.cached_calls == 1


def test_key_covers_max_tokens_stop_and_model(tmp_path):
    inner = Slow()
    ex = CachedExecutor(inner, tmp_path / "c.sqlite")
    ex.complete("abc", max_tokens=8)
    ex.complete("abc", max_tokens=2)
    ex.complete("abc", max_tokens=8, stop=["\n"])
    ex.complete("abd", max_tokens=8)
    inner.model_id = "slow-2"
    ex.complete("abc", max_tokens=8)
    assert inner.calls == 5 and ex.hits == 0


def test_refuses_sampling(tmp_path):
    with pytest.raises(InvalidInput, match="temperature 0"):
        CachedExecutor(Slow(temperature=0.7), tmp_path / "c.sqlite")

    class NoTemp:
        name = "x"
        model_id = "x"

    with pytest.raises(InvalidInput):
        CachedExecutor(NoTemp(), tmp_path / "c.sqlite")  # type: ignore[arg-type]


def test_survives_reopen_and_is_shared(tmp_path):
    path = tmp_path / "sub" / "c.sqlite"
    with CachedExecutor(Slow(), path) as ex:
        ex.complete("hello")
    inner = Slow()
    other = CachedExecutor(Slow(), path)  # a second writer on the same file (as another process)
    reopened = CachedExecutor(inner, path)
    assert reopened.complete("hello").cached is True and inner.calls == 0
    other.complete("world")
    assert reopened.complete("world").cached is True
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    reopened.close()
    with pytest.raises(StoreError):
        reopened.complete("hello")
    other.close()


def test_failures_are_not_cached(tmp_path):
    answers = {}
    ex = CachedExecutor(ScriptedExecutor(answers), tmp_path / "c.sqlite")
    with pytest.raises(LLMError):
        ex.complete("Q")
    answers["Q"] = "A"
    assert ex.complete("Q").text == "A" and ex.misses == 2


def test_two_processes(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "c.sqlite"
    code = (
        "import sys\n"
        "from memcurator.llm import CachedExecutor\n"
        "from memcurator.llm.fake import ScriptedExecutor\n"
        "ex = CachedExecutor(ScriptedExecutor(lambda p: p * 2), sys.argv[1])\n"
        "for i in range(200):\n"
        "    ex.complete(f'p{i % 50}')\n"
    )
    # four processes race to create the same new file (CI once saw "database is locked" on the
    # WAL switch with two)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    n = sqlite3.connect(path).execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    assert n == 50


def test_retry_busy_rides_out_lock_errors_that_bypass_the_busy_handler():
    """The CI failure: ``PRAGMA journal_mode = WAL`` raised "database is locked" at once."""
    import random

    from memcurator.errors import StoreError
    from memcurator.store.sqlite import retry_busy

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    assert retry_busy(flaky, timeout_s=5.0, what="x", rng=random.Random(0)) == "ok"
    assert len(calls) == 3

    def broken():
        raise sqlite3.OperationalError("no such table: t")

    with pytest.raises(StoreError, match="no such table"):
        retry_busy(broken, timeout_s=5.0, what="x")

    def always_locked():
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(StoreError, match="stayed locked"):
        retry_busy(always_locked, timeout_s=0.05, what="x")
