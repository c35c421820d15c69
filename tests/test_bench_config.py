"""Bench configuration is validated before any work starts; results files are strict JSON."""

from __future__ import annotations

import json
import math

import pytest

from memcurator.bench.agent import AgentConfig, copy_first_action, extract_sql, memory_block
from memcurator.bench.report import json_safe
from memcurator.bench.runner import BenchConfig
from memcurator.bench.stream import StreamConfig
from memcurator.errors import InvalidInput, UnknownName


@pytest.mark.parametrize(
    "kw",
    [
        {"n_tasks": 0},
        {"n_families": 0},
        {"payload": "bogus"},
        {"drift": 1.5},
        {"zipf": -1.0},
        {"poison_targets": 0},
    ],
)
def test_stream_config_rejects_bad_values(kw: dict) -> None:
    with pytest.raises(InvalidInput):
        StreamConfig(**kw)


@pytest.mark.parametrize(
    "kw", [{"k": 0}, {"inject_chars": -5}, {"max_tokens": 0}, {"expert_cost_usd": -1.0}]
)
def test_agent_config_rejects_bad_values(kw: dict) -> None:
    with pytest.raises(InvalidInput):
        AgentConfig(**kw)


def test_bench_config_rejects_bad_values() -> None:
    with pytest.raises(InvalidInput):
        BenchConfig(seeds=[])
    with pytest.raises(InvalidInput):
        BenchConfig(max_bytes=0)
    with pytest.raises(InvalidInput):
        BenchConfig(poison_channel="email")
    with pytest.raises(UnknownName):
        BenchConfig(policies=["nope"])


def test_summary_is_strict_json() -> None:
    doc = json_safe({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": 2}})
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": {"d": 2}}
    assert not any(isinstance(v, float) and math.isnan(v) for v in doc.values())


def test_memory_block_respects_the_character_budget() -> None:
    from memcurator import Memory

    mem = Memory(policy="keep-all")
    a = mem.write("Task: one\nAction: SELECT 1;").id
    b = mem.write("Task: two two two two\nAction: SELECT 2;").id
    ents = [mem.get(a), mem.get(b)]
    block, used = memory_block(ents, budget_chars=30)
    assert len(block) <= 30  # the whole injected block counts against the budget
    assert used == [a, b] and block.startswith(mem.get(a).text)
    assert memory_block(ents, 0) == ("", [])


def test_outside_entries_are_spotlighted_only_under_the_trust_policy() -> None:
    """Spotlighting is the Trust policy's prompt defence: curator's probation policies wrap an
    outside entry as data; the ungoverned baselines show it as it is (their ASR stays theirs)."""
    from memcurator import Memory

    for policy, wrapped in (("keep-all", False), ("lru", False), ("curator", True)):
        mem = Memory(policy=policy)
        own = mem.write("Task: one\nAction: SELECT 1;").id
        out = mem.write("Task: two\nAction: SELECT 2;", origin="peer").id
        if wrapped:  # on probation: corroborate it so that it may be injected at all
            mem.feedback([out], 1.0, verified=True)
        block, used = memory_block(
            [mem.get(own), mem.get(out)], 10_000, spotlight_outside=mem.policy.probation
        )
        assert used == [own, out]
        assert block.startswith(mem.get(own).text)  # own experience is never wrapped
        assert ("<<data from peer" in block) is wrapped, policy
        assert ("Action: SELECT 2;" in block) is (not wrapped), policy


def test_extract_sql_and_fake_copier() -> None:
    assert extract_sql("```sql\nSELECT 1;\n```") == "SELECT 1;"
    assert extract_sql(" SQL: SELECT 2;\nmore") == "SELECT 2;"
    assert copy_first_action("Table: t\nTask: x\nAction:") == " SELECT 1;"
