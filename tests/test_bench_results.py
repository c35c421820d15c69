"""Merging result folders (memcurator.bench.results) and resuming a bench (bench.session)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from memcurator.bench.results import check_out, config_clash, merge_folders, write_merged
from memcurator.errors import InvalidInput

CONFIG = {"tasks": 3, "max_bytes": 100_000, "executor": "FakeExecutor()", "complete": True}


def _run(policy: str, seed: int, acc: float, **kw: Any) -> dict[str, Any]:
    return {"policy": policy, "seed": seed, "tasks": 3, "accuracy": acc, "peak_kb": 1.0, **kw}


def _folder(
    path: Path,
    runs: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    records: bool = True,
) -> Path:
    """A results folder as bench writes it: summary.json and, per run, 3 rows of records.csv."""
    path.mkdir(parents=True)
    doc = {"config": {**CONFIG, "runs_done": len(runs), **(config or {})}, "runs": runs}
    (path / "summary.json").write_text(json.dumps(doc))
    if records:
        with (path / "records.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["policy", "seed", "step", "task_id", "local_ok"])
            w.writeheader()
            for r in runs:
                for step in range(3):
                    ok = step < round(3 * r["accuracy"])
                    w.writerow(
                        {
                            "policy": r["policy"],
                            "seed": r["seed"],
                            "step": step,
                            "task_id": f"t{step}",
                            "local_ok": ok,
                        }
                    )
    return path


def test_a_settings_clash_is_refused(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1.0)])
    b = _folder(tmp_path / "b", [_run("lru", 1, 1.0)], {"max_bytes": 50_000})
    with pytest.raises(InvalidInput, match=r"different settings \(max_bytes: 100000 in .*a"):
        merge_folders([a, b])


def test_the_executor_thread_count_is_no_clash() -> None:
    a = {"executor": "GGUFExecutor(model='m', n_threads=2, seed=0)"}
    b = {"executor": "GGUFExecutor(model='m', n_threads=8, seed=0)"}
    assert config_clash([("a", a), ("b", b)]) == ""


def test_a_later_folders_run_replaces_an_earlier_one(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1 / 3), _run("lru", 1, 1.0)])
    b = _folder(tmp_path / "b", [_run("lru", 0, 2 / 3)])  # a rerun of (lru, 0)
    m = merge_folders([a, b])
    assert m.kind == "single"
    assert sorted((r["policy"], r["seed"], r["accuracy"]) for r in m.runs) == [
        ("lru", 0, 2 / 3),
        ("lru", 1, 1.0),
    ]
    assert m.summary[0]["seeds"] == 2
    assert m.summary[0]["accuracy"] == pytest.approx((2 / 3 + 1.0) / 2)
    # records follow the runs: (lru, 0) from b only, deduped
    oks = sorted(r["local_ok"] for r in m.records if r["seed"] == "0")
    assert len(m.records) == 6 and oks == ["False", "True", "True"]
    assert m.config["merged"] == [str(a), str(b)] and m.config["complete"] is True


def test_reruns_in_one_folder_and_the_same_folder_twice_are_deduped(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1.0), _run("keep-all", 0, 0.0)])
    m = merge_folders([a, a])
    assert len(m.runs) == 2 and len(m.records) == 6
    assert [r["policy"] for r in m.summary] == ["lru", "keep-all"]


def test_incomplete_folders_are_named(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1.0)])
    b = _folder(tmp_path / "b", [_run("lru", 1, 0.0)], {"complete": False, "runs_done": 1})
    m = merge_folders([a, b])
    assert m.partial == [f"{b} (1 runs finished)"]
    assert m.config["complete"] is False
    assert len(m.runs) == 2


def test_folders_without_records_merge_their_summaries(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1.0)])
    b = _folder(tmp_path / "b", [_run("lru", 1, 0.0)], records=False)
    m = merge_folders([a, b])
    assert len(m.runs) == 2 and m.records == []


@pytest.mark.parametrize(
    "runs_b, config_b, match",
    [
        ([], {}, "no runs"),
        ([_run("lru", 1, 1.0, tasks=5)], {"tasks": 3}, "different lengths"),
        ([_run("lru", 1, 1.0)], {"kind": "peers"}, "cannot merge peer-group folders"),
    ],
)
def test_merges_that_are_refused(
    tmp_path: Path, runs_b: list[dict[str, Any]], config_b: dict[str, Any], match: str
) -> None:
    a = _folder(tmp_path / "a", [] if match == "no runs" else [_run("lru", 0, 1.0)])
    b = _folder(tmp_path / "b", runs_b, config_b)
    with pytest.raises(InvalidInput, match=match):
        merge_folders([a, b])


def test_missing_folder_and_no_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no results folder"):
        merge_folders([])
    with pytest.raises(InvalidInput, match="no summary.json"):
        merge_folders([tmp_path])


def test_peer_group_runs_are_keyed_by_uplink(tmp_path: Path) -> None:
    peer = {"kind": "peers", "peers": 2, "baseline": "lru"}
    a = _folder(
        tmp_path / "a",
        [_run("lru", 0, 1.0, uplink=100), _run("lru", 0, 1.0, uplink=200)],
        peer,
        records=False,
    )
    b = _folder(tmp_path / "b", [_run("lru", 0, 0.0, uplink=200)], peer, records=False)
    m = merge_folders([a, b])
    assert m.kind == "peers" and m.baseline == "lru" and m.summary == []
    assert sorted((r["uplink"], r["accuracy"]) for r in m.runs) == [(100, 1.0), (200, 0.0)]
    c = _folder(tmp_path / "c", [_run("lru", 1, 0.0, uplink=200)], {**peer, "peers": 4})
    with pytest.raises(InvalidInput, match="peer-group folders were run with different"):
        merge_folders([a, c])


def test_write_merged_writes_a_folder_that_merges_again(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", [_run("lru", 0, 1.0)])
    b = _folder(tmp_path / "b", [_run("lru", 1, 0.0)])
    m = merge_folders([a, b])
    with pytest.raises(InvalidInput, match="one of the merged folders"):
        write_merged(a, m)
    written = write_merged(tmp_path / "m", m)
    assert tmp_path / "m" / "summary.json" in written
    doc = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert doc["merged"] == [str(a), str(b)] and "merged" not in doc["config"]
    assert len(merge_folders([tmp_path / "m", a]).runs) == 2
    check_out(tmp_path / "elsewhere", [a, b])  # no error


# ----------------------------------------------------------------------------- resume


def _cfg(policies: list[str], seeds: list[int]) -> Any:
    from memcurator.bench.runner import BenchConfig
    from memcurator.bench.stream import StreamConfig

    return BenchConfig(policies=policies, seeds=seeds, stream=StreamConfig(n_tasks=8, n_families=4))


def _records(folder: Path) -> list[dict[str, str]]:
    timing = ("mem_s", "llm_s", "wall_s", "cached")
    with (folder / "records.csv").open(newline="") as f:
        return [{k: v for k, v in r.items() if k not in timing} for r in csv.DictReader(f)]


def _summary(folder: Path) -> list[dict[str, Any]]:
    doc = json.loads((folder / "summary.json").read_text())
    drop = ("mem_s", "llm_s", "wall_s", "cache_hit_rate", "latency_task_s")
    return [{k: v for k, v in row.items() if not k.startswith(drop)} for row in doc["summary"]]


def test_an_interrupted_bench_resumes_to_the_uninterrupted_folder(tmp_path: Path) -> None:
    """Interrupted at the start of its second run, then resumed: the same records and summary."""
    from memcurator.bench.runner import load_families
    from memcurator.bench.session import bench_settings, make_executor, run_to_folder, saved_runs

    fams = load_families()
    ex = make_executor("fake")
    cfg = _cfg(["keep-all", "lru", "curator"], [0, 1])
    settings = bench_settings(cfg, ex)
    whole = tmp_path / "whole"
    run_to_folder(cfg, ex, fams, whole, settings)

    started: list[str] = []

    def stop_at_second(label: str, n: int) -> Any:
        started.append(label)
        if len(started) == 2:
            raise KeyboardInterrupt
        return lambda: None

    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        run_to_folder(cfg, ex, fams, cut, settings, progress=stop_at_second)
    doc = json.loads((cut / "summary.json").read_text())
    assert doc["config"]["complete"] is False and doc["config"]["runs_done"] == 1
    assert [(r.policy, r.seed) for r in saved_runs(cut)] == [("keep-all", 0)]

    ran: list[str] = []
    runs, _ = run_to_folder(
        cfg, ex, fams, cut, settings, resume=True, progress=lambda lb, n: ran.append(lb) or None
    )
    assert "keep-all seed 0" not in ran and len(ran) == 5  # only the missing runs ran
    assert json.loads((cut / "summary.json").read_text())["config"]["complete"] is True
    assert _records(cut) == _records(whole)
    assert _summary(cut) == _summary(whole)


def test_resume_refuses_other_settings_and_unplanned_runs(tmp_path: Path) -> None:
    from memcurator.bench.runner import load_families
    from memcurator.bench.session import bench_settings, make_executor, run_to_folder

    fams, ex = load_families(), make_executor("fake")
    cfg = _cfg(["keep-all", "lru"], [0])
    out = tmp_path / "o"
    run_to_folder(cfg, ex, fams, out, bench_settings(cfg, ex))
    other = _cfg(["keep-all", "lru"], [0])
    other.max_bytes = 50_000
    with pytest.raises(InvalidInput, match=r"other settings \(max_bytes: 120000"):
        run_to_folder(other, ex, fams, out, bench_settings(other, ex), resume=True)
    fewer = _cfg(["keep-all"], [0])
    with pytest.raises(InvalidInput, match="lru seed 0"):
        run_to_folder(fewer, ex, fams, out, bench_settings(fewer, ex), resume=True)
