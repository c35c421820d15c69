"""``memcurator bench --compress-text``: every run's texts are stored zstd-compressed with a
per-namespace dictionary, and the budget and the bytes-by-part columns count what is stored
(issue 35)."""

from __future__ import annotations

from memcurator.bench.runner import BenchConfig, load_families, run_policy
from memcurator.bench.session import make_executor
from memcurator.bench.stream import StreamConfig, build_stream


def _run(compress: bool, policy: str = "keep-all", max_bytes: int = 120_000, dtype="float32"):
    cfg = BenchConfig(
        policies=(policy,),
        stream=StreamConfig(n_tasks=90, poison=0),
        max_bytes=max_bytes,
        compress_text=compress,
        vector_dtype=dtype,
    )
    stream = build_stream(cfg.stream, load_families())
    return run_policy(policy, stream, make_executor("fake"), cfg, 0)


def test_compressed_runs_store_fewer_text_bytes_and_count_them():
    plain, packed = _run(False), _run(True)
    # same tasks, same answers: compression changes bytes, not what is recalled
    assert [r.local_ok for r in plain.records] == [r.local_ok for r in packed.records]
    assert packed.bytes_by_part["n"] == plain.bytes_by_part["n"] > 64
    # text and meta are stored together in one frame (schema v8): the meta part is folded in
    both = [r.bytes_by_part["text"] + r.bytes_by_part["meta"] for r in (plain, packed)]
    assert packed.bytes_by_part["meta"] < plain.bytes_by_part["meta"]
    assert both[1] < 0.6 * both[0]
    # the entries' accounted bytes shrink by exactly what text and meta save
    assert plain.bytes_by_part["total"] - packed.bytes_by_part["total"] == both[0] - both[1]


def test_a_small_budget_compresses_and_holds_more_entries():
    # 20 KB of binary-vector entries: a few dozen, which train a dictionary from 8 entries on
    plain, packed = _run(False, "lru", 20_000, "binary"), _run(True, "lru", 20_000, "binary")
    assert packed.bytes_by_part["total"] <= 20_000
    assert packed.bytes_by_part["n"] > 1.3 * plain.bytes_by_part["n"]
