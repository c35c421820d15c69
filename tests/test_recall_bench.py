"""benchmarks/recall_bench.py on a tiny stream: its baseline is Memory.recall under keep-all."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from memcurator import Memory
from memcurator.bench.runner import load_families
from memcurator.policy import create_policy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rb():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "recall_bench", ROOT / "benchmarks/recall_bench.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["recall_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def replay(rb):  # type: ignore[no-untyped-def]
    return rb.replay(rb.build("default", 80, 0, load_families()))


def test_replay_writes_every_task_and_the_poison(rb, replay) -> None:  # type: ignore[no-untyped-def]
    assert len(replay.queries) == 80
    assert sum(w.poison for w in replay.entries) >= 1
    assert [q.n_resident for q in replay.queries] == sorted(q.n_resident for q in replay.queries)
    assert replay.queries[0].n_resident == 0
    for w in replay.entries:
        assert w.text.startswith("Task: ") and w.task_text in w.text


def test_scores_are_consistent(rb, replay) -> None:  # type: ignore[no-untyped-def]
    cfgs = rb.configs(["baseline", "embed=task,bm25=task,recency=0.05"])
    for c in cfgs:
        s = rb.evaluate(replay, c)
        assert s.n_tasks == 80 and 0 < s.n_cur <= s.n_any <= s.n_tasks
        assert s.hits_any[1] <= s.hits_any[3] <= s.hits_any[5] <= s.n_any
        assert s.hits_cur[1] <= s.hits_cur[3] <= s.hits_cur[5] <= s.n_cur
        assert s.top1_same == s.hits_any[1]


def test_memory_config_reproduces_memory_recall_under_keep_all(rb, replay) -> None:  # type: ignore[no-untyped-def]
    """If Memory.recall changes, this names the benchmark config that must follow it: since
    issue 9 it is ``memory`` (task line for both legs, blend, newer version first), no longer
    ``baseline``."""
    mem = Memory(":memory:", policy=create_policy("keep-all"))
    fam: dict[str, str] = {}
    written = 0
    got = []
    for q in replay.queries:
        for w in replay.entries[written : q.n_resident]:
            r = mem.write(w.text, kind="raw")
            fam[r.id] = "poison" if w.poison else w.family
        written = q.n_resident
        hit = mem.recall(q.text, k=1, observe=False)
        got.append(bool(hit.ids) and fam[hit.ids[0]] == q.family)
    s = rb.evaluate(replay, rb.configs(["memory"])[0])
    assert sum(got) == s.top1_same
    base = rb.evaluate(replay, rb.configs(["baseline"])[0])
    assert base.top1_same != s.top1_same or base.hits_any != s.hits_any  # the test can tell


def test_unknown_config_and_stream_are_refused(rb) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit, match="known"):
        rb.configs(["nope"])
    with pytest.raises(SystemExit, match="known"):
        rb.build("nope", 10, 0, [])


def test_main_prints_a_table(rb, capsys) -> None:  # type: ignore[no-untyped-def]
    rb.main(["--tasks", "40", "--seeds", "1", "--configs", "baseline;embed=task"])
    out = capsys.readouterr().out
    assert "| baseline |" in out and "| embed=task |" in out
