"""The command line: bench with the scripted executor, partial results, report merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcurator.cli import app

runner = CliRunner()


def _bench(out: Path, *extra: str) -> str:
    res = runner.invoke(
        app,
        [
            "bench",
            "--executor",
            "fake",
            "--tasks",
            "12",
            "--families",
            "6",
            "--policies",
            "keep-all,no-memory",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bench")
    _bench(base / "s0", "--seed-start", "0")
    _bench(base / "s1", "--seed-start", "1")
    return base / "s0", base / "s1"


def test_bench_writes_complete_results(two_seeds: tuple[Path, Path]) -> None:
    s0, _ = two_seeds
    doc = json.loads((s0 / "summary.json").read_text())
    assert doc["config"]["complete"] is True
    assert doc["config"]["runs_done"] == 2
    assert [(r["policy"], r["seed"], r["tasks"]) for r in doc["runs"]] == [
        ("keep-all", 0, 12),
        ("no-memory", 0, 12),
    ]
    header = (s0 / "records.csv").read_text().splitlines()[0]
    assert header.startswith("policy,seed,step,task_id")


def test_bench_prints_plain_progress_without_a_terminal(tmp_path: Path) -> None:
    out = _bench(tmp_path / "p", "--tasks", "10")
    assert "keep-all seed 0: 1/10 tasks" in out
    assert "no-memory seed 0: 10/10 tasks" in out


def test_run_bench_reports_each_finished_run() -> None:
    from memcurator.bench.agent import copy_first_action
    from memcurator.bench.runner import BenchConfig, load_families, run_bench
    from memcurator.bench.stream import StreamConfig
    from memcurator.llm import create_executor

    cfg = BenchConfig(
        policies=["keep-all", "lru"],
        seeds=[0, 1],
        stream=StreamConfig(n_tasks=8, n_families=4),
    )
    seen: list[list[tuple[str, int]]] = []
    ex = create_executor("fake", responder=copy_first_action)
    runs = run_bench(
        cfg,
        ex,
        families=load_families(),
        on_run=lambda d: seen.append([(r.policy, r.seed) for r in d]),
    )
    assert [len(s) for s in seen] == [1, 2, 3, 4]
    assert seen[-1] == [(r.policy, r.seed) for r in runs]
    assert seen[1] == [("keep-all", 0), ("lru", 0)]


def test_report_merges_seeds(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, s1 = two_seeds
    res = runner.invoke(app, ["report", str(s0), str(s1), "--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert sorted((r["policy"], r["seed"]) for r in doc["runs"]) == [
        ("keep-all", 0),
        ("keep-all", 1),
        ("no-memory", 0),
        ("no-memory", 1),
    ]
    assert {row["policy"]: row["seeds"] for row in doc["summary"]} == {
        "keep-all": 2,
        "no-memory": 2,
    }
    assert (tmp_path / "m" / "summary.md").read_text().startswith("| policy")
    assert "partial" not in res.output


def test_report_flags_partial_folders(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, _ = two_seeds
    part = tmp_path / "part"
    part.mkdir()
    doc = json.loads((s0 / "summary.json").read_text())
    doc["config"].update(complete=False, runs_done=1)
    doc["runs"] = doc["runs"][:1]
    (part / "summary.json").write_text(json.dumps(doc))
    res = runner.invoke(app, ["report", str(part)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps long lines
    assert "partial folders" in text and "part (1 runs finished)" in text


def test_report_refuses_streams_of_different_lengths(
    two_seeds: tuple[Path, Path], tmp_path: Path
) -> None:
    s0, _ = two_seeds
    other = tmp_path / "short"
    _bench(other, "--tasks", "6")
    res = runner.invoke(app, ["report", str(s0), str(other)])
    assert res.exit_code != 0
    assert "different lengths [6, 12]" in " ".join(res.output.split())


def test_report_missing_folder(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code != 0
    assert "no summary.json" in " ".join(res.output.split())


def test_policies_lists_the_registry() -> None:
    res = runner.invoke(app, ["policies"])
    assert res.exit_code == 0
    names = res.output.split()
    assert {"curator", "keep-all", "tokenworth", "curator+worth"} <= set(names)


def test_compare_pairs_tasks(two_seeds: tuple[Path, Path]) -> None:
    s0, s1 = two_seeds
    res = runner.invoke(app, ["compare", str(s0), str(s1), "--baseline", "keep-all"])
    assert res.exit_code == 0, res.output
    assert "no-memory" in res.output and "24" in res.output  # 12 tasks x 2 seeds paired
    bad = runner.invoke(app, ["compare", str(s0), "--baseline", "curator"])
    assert bad.exit_code != 0
    assert "no records of baseline 'curator'" in " ".join(bad.output.split())
