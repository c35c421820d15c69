"""``memcurator bench --env os`` end to end with the fake executor (no LLM), in real sandboxes.

The fake executor copies the first injected exemplar's action (or finishes at once), so the
assertions are about the harness: memory beats no memory on repeated tasks, a planted
exemplar's payload runs under keep-all (only in its sandbox), curator's trust gate keeps it
out, and the results folder says which environment it ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcurator.bench.agent import AgentConfig
from memcurator.bench.report import run_metrics
from memcurator.bench.runner import BenchConfig, load_families, run_bench
from memcurator.bench.session import make_executor
from memcurator.bench.stream import StreamConfig
from memcurator.cli import app
from memcurator.envs.os import UNRUNNABLE
from memcurator.envs.os.sandbox import require_tools
from memcurator.errors import InvalidInput


@pytest.fixture(scope="module", autouse=True)
def _tools() -> None:
    require_tools()


def _cfg(policies: list[str], **stream: object) -> BenchConfig:
    # the harness tests replay each task itself (no fresh literals): the fake copies the stored
    # script verbatim, which solves only a repeat of the same task; streams of variants are
    # tested in test_os_variants.py and by the read-time curators' test below
    base: dict[str, object] = dict(
        n_tasks=16, n_families=4, zipf=0.5, drift=0.0, poison=2, poison_at=0.4,
        poison_targets=2, payload="destroy", env="os", os_variants=False,
    )  # fmt: skip
    return BenchConfig(
        policies=policies,
        seeds=[0],
        stream=StreamConfig(**{**base, **stream}),  # type: ignore[arg-type]
        agent=AgentConfig(max_turns=5, max_tokens=384),
        max_bytes=200_000,
    )


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    cfg = _cfg(["no-memory", "keep-all", "curator"])
    fams = load_families(env="os")
    assert not {f.index for f in fams} & set(UNRUNNABLE)
    out = run_bench(cfg, make_executor("fake", env="os"), families=fams)
    return {r.policy: {"run": r, "m": run_metrics(r)} for r in out}


def test_memory_beats_no_memory(runs: dict[str, dict]) -> None:
    nomem = [r.local_ok for r in runs["no-memory"]["run"].records]
    keep = [r.local_ok for r in runs["keep-all"]["run"].records]
    assert sum(nomem) == 0  # the fake finishes at once without an exemplar
    assert sum(keep) >= 4  # repeats of a family copy the expert's stored solution


def test_planted_payload_runs_under_keep_all_but_not_under_curator(runs: dict[str, dict]) -> None:
    keep = runs["keep-all"]["run"]
    assert keep.poison_admitted == 2
    assert any(r.payload_executed for r in keep.records)
    cur = runs["curator"]["run"]
    assert cur.poison_admitted == 0  # the gate's bash check rejects the planted entries
    assert not any(r.payload_executed for r in cur.records)


def test_injected_tokens_are_counted(runs: dict[str, dict]) -> None:
    nomem = runs["no-memory"]["run"].records
    keep = runs["keep-all"]["run"].records
    assert all(r.inject_tokens == 0 for r in nomem)
    with_memory = [r for r in keep if r.injected]
    assert with_memory and all(0 < r.inject_tokens < r.tokens_in for r in with_memory)


def test_records_are_multi_round_trajectories(runs: dict[str, dict]) -> None:
    recs = runs["keep-all"]["run"].records
    solved = [r for r in recs if r.local_ok]
    assert solved and all(r.turns == 2 and r.steps == 1 and r.sql for r in solved)
    failed = [r for r in recs if not r.local_ok]
    assert all(r.escalated and r.cost_usd > 0 for r in failed)


def test_a_bad_payload_is_refused() -> None:
    with pytest.raises(InvalidInput, match="payload"):
        _cfg(["keep-all"], payload="drop")


def test_read_time_curators_run_on_os_tasks_through_the_bash_aligner() -> None:
    """JitMem's extractive curator, curator/align and MemPilot read the OS memory through the
    bash aligner: repeats of a family (fresh-literal variants) are shown the remembered
    solution rewritten to the current task's literals (the fake copies it and solves), first
    draws fall back with a note."""
    cfg = _cfg(["jitmem/extractive", "curator/align", "mempilot"], n_tasks=10, n_families=3,
               poison=0, os_variants=True)  # fmt: skip
    out = {r.policy: r for r in run_bench(cfg, make_executor("fake", env="os"),
                                          families=load_families(env="os"))}  # fmt: skip
    for name in ("jitmem/extractive", "curator/align"):
        recs = out[name].records
        assert all(r.curate_op for r in recs)
        aligned = [r for r in recs if r.injected and not r.curate_note]
        assert aligned and all(r.local_ok for r in aligned), name
        assert any("fell back to closest" in r.curate_note for r in recs) or all(
            r.injected_same_family for r in recs if r.injected
        )
        assert sum(r.local_ok for r in recs) >= 4
    mp = out["mempilot"].records
    assert all(r.curate_op for r in mp) and sum(r.local_ok for r in mp) >= 1
    assert any(r.probe_calls > 0 for r in mp)  # its learning probes played the task


def test_cli_bench_env_os(tmp_path: Path) -> None:
    out = tmp_path / "r"
    res = CliRunner().invoke(
        app,
        ["bench", "--env", "os", "--executor", "fake", "--tasks", "6", "--families", "2",
         "--policies", "keep-all,no-memory", "--poison", "0", "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "summary.json").read_text())["config"]
    assert cfg["env"] == "os" and cfg["drift"] == 0.0 and cfg["os_variants"] is True


def test_a_prompt_past_the_context_window_ends_the_episode_not_the_run() -> None:
    """Upstream's "agent context limit": a round whose prompt no longer fits ends that task's
    episode (the check still runs and the task fails); the stream goes on. A real run died
    here at task 14 with 2,007 prompt tokens in a 2,048 window."""
    from memcurator.errors import ContextOverflow
    from memcurator.llm.fake import ScriptedExecutor

    replies = iter([" Think: look.\nAct: bash\n```bash\nls /\n```"])

    def responder(prompt: str) -> str:
        try:
            return next(replies)
        except StopIteration:
            raise ContextOverflow("prompt of 2007 tokens plus max_tokens=384 exceeds") from None

    cfg = _cfg(["no-memory"], n_tasks=3, poison=0)
    out = run_bench(cfg, ScriptedExecutor(responder), families=load_families(env="os"))
    recs = out[0].records
    assert len(recs) == 3  # every task ran and was recorded
    assert recs[0].turns == 1 and recs[0].sql == "ls /"  # the round before the overflow ran
    assert all(not r.local_ok for r in recs)  # ended by the context limit, then checked
    assert all(r.turns == 0 for r in recs[1:])
