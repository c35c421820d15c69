"""Budget fronts: budget lists, one run per (bounded policy, budget), references once, the
per-budget table with CIs and the knee, merging folders, bytes per entry by part."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcurator.bench.budget_fronts import (
    bootstrap_ci,
    front_markdown,
    front_rows,
    parse_budgets,
    split_label,
)
from memcurator.bench.runner import BenchConfig, n_runs_per_seed
from memcurator.cli import app
from memcurator.errors import InvalidInput

runner = CliRunner()


@pytest.mark.parametrize(
    "text, want",
    [("25k,50K, 100000", [25000, 50000, 100000]), ("1.5M", [1_500_000]), ("7", [7])],
)
def test_parse_budgets(text: str, want: list[int]) -> None:
    assert parse_budgets(text) == want


@pytest.mark.parametrize(
    "text, msg", [("", "at least one"), ("25k,25000", "twice"), ("abc", "not a number"),
                  ("0", "positive"), ("1.5", "whole")]
)  # fmt: skip
def test_parse_budgets_rejects(text: str, msg: str) -> None:
    with pytest.raises(InvalidInput, match=msg):
        parse_budgets(text)


def test_labels_round_trip() -> None:
    assert split_label("curator/lambda=0@25k") == ("curator/lambda=0", 25000)
    assert split_label("lru@1500") == ("lru", 1500)
    assert split_label("keep-all") == ("keep-all", None)


def test_plan_runs_bounded_policies_per_budget_references_once() -> None:
    cfg = BenchConfig(policies=["curator", "keep-all", "lru"], sweep_values=[10_000, 20_000])
    assert n_runs_per_seed(cfg) == 5
    with pytest.raises(InvalidInput, match="cannot sweep"):
        BenchConfig(policies=["lru"], sweep_values=[1, 2], sweep_setting="poison_channel")
    with pytest.raises(InvalidInput, match="twice"):
        BenchConfig(policies=["lru"], sweep_values=[1, 1])


def test_bootstrap_ci_narrows_with_more_tasks() -> None:
    rng = np.random.default_rng(0)
    small = bootstrap_ci([rng.random(20) < 0.5])
    large = bootstrap_ci([rng.random(2000) < 0.5])
    assert small[1] - small[0] > 2 * (large[1] - large[0])
    assert large[0] < 0.5 < large[1]


def _run(policy: str, seed: int, acc: float, kb: float, budget: int | None) -> dict:
    d = {"policy": policy, "seed": seed, "tasks": 10, "accuracy": acc, "victim_accuracy": acc,
         "peak_kb": kb, "same_family_rate": 0.5, "decisions": {"evict": 3}}  # fmt: skip
    if budget is not None:
        d.update(base_policy=policy.split("@")[0], sweep_setting="max_bytes", sweep_value=budget)
    return d


def test_knee_is_smallest_budget_within_97_percent_of_best() -> None:
    runs = [
        _run("a@10k", 0, 0.50, 9.0, 10_000),
        _run("a@20k", 0, 0.785, 19.0, 20_000),  # 0.785 / 0.80 = 0.98: the knee
        _run("a@40k", 0, 0.80, 38.0, 40_000),
        _run("keep-all", 0, 0.70, 200.0, None),
        _run("full-oracle", 0, 0.80, 200.0, None),
    ]
    rows = front_rows(runs)
    knee = [r["budget"] for r in rows if r.get("knee")]
    assert knee == [20_000]
    assert rows[0]["ci"] == "sd"  # no records: sd over seeds
    ref = [r for r in rows if r["budget"] is None]
    assert [r["policy"] for r in ref] == ["keep-all", "full-oracle"]
    assert rows[1]["of_oracle"] == pytest.approx(0.785 / 0.80)
    assert rows[1]["kb_of_keep_all"] == pytest.approx(19.0 / 200.0)
    md = front_markdown(rows)
    assert "- a: reaches 97% of full-oracle at 20k (peak 19.0 KB, 9.5% of keep-all's)" in md


def test_bench_front_and_report_on_merged_seed_folders(tmp_path: Path) -> None:
    folders = []
    for s in (0, 1):
        out = tmp_path / f"s{s}"
        res = runner.invoke(
            app,
            ["bench", "--executor", "fake", "--tasks", "14", "--families", "6",
             "--policies", "lru,keep-all", "--max-bytes", "6k,12k", "--seed-start", str(s),
             "--out", str(out)],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        folders.append(out)
    doc = json.loads((folders[0] / "summary.json").read_text())
    assert doc["config"]["max_bytes"] == [6000, 12000]
    runs = {r["policy"]: r for r in doc["runs"]}
    assert set(runs) == {"lru@6k", "lru@12k", "keep-all"}
    assert runs["lru@6k"]["max_bytes"] == 6000 and runs["keep-all"]["max_bytes"] is None
    assert runs["lru@6k"]["peak_kb"] * 1024 <= 6000 < runs["keep-all"]["peak_kb"] * 1024
    for r in runs.values():  # bytes per entry by part add up to the accounted bytes
        parts = r["entry_text_b"] + r["entry_meta_b"] + r["entry_vec_b"] + r["entry_detail_b"]
        assert parts == pytest.approx(r["entry_total_b"])
        assert r["entry_vec_b"] == 2048.0 and 0 < r["vec_share"] < 1
    assert "| lru | 6k |" in (folders[0] / "budget_fronts.md").read_text()
    assert (folders[0] / "budget_fronts.png").stat().st_size > 0
    merged = tmp_path / "m"
    res = runner.invoke(app, ["report", *map(str, folders), "--out", str(merged)])
    assert res.exit_code == 0, res.output
    assert "budget fronts" in res.output
    rows = json.loads((merged / "budget_fronts.json").read_text())["rows"]
    lru = [r for r in rows if r["policy"] == "lru"]
    assert [r["budget"] for r in lru] == [6000, 12000]
    assert all(r["seeds"] == 2 and r["ci"] == "bootstrap" for r in rows)
    assert all(r["accuracy_lo"] <= r["accuracy"] <= r["accuracy_hi"] for r in rows)


def test_single_budget_keeps_plain_labels(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["bench", "--executor", "fake", "--tasks", "6", "--families", "4", "--policies", "lru",
         "--max-bytes", "50k", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert doc["config"]["max_bytes"] == 50000 and doc["runs"][0]["policy"] == "lru"
    assert not (tmp_path / "o" / "budget_fronts.md").exists()
