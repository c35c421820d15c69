"""Paired per-task comparison of policies: bootstrap interval and McNemar test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memcurator.bench.compare import paired_differences, read_records
from memcurator.errors import InvalidInput


def _records(rates: dict[str, float], n: int = 1000, seeds: int = 2, shared: float = 0.0):
    """Synthetic outcomes; with ``shared`` the policies draw from one uniform per task."""
    rng = np.random.default_rng(7)
    rows = []
    for s in range(seeds):
        u_common = rng.random(n)
        for pol, rate in rates.items():
            u = np.where(rng.random(n) < shared, u_common, rng.random(n))
            for i in range(n):
                rows.append(
                    {
                        "policy": pol,
                        "seed": str(s),
                        "step": str(i),
                        "subset": "victim" if i % 4 == 0 else "clean",
                        "local_ok": str(bool(u[i] < rate)),
                    }
                )
    return rows


def test_planted_difference_is_recovered() -> None:
    rows = _records({"a": 0.6, "b": 0.4})
    (d,) = paired_differences(rows, "b", n_boot=500)
    assert d["n"] == 2000
    assert abs(d["diff"] - 0.2) < 0.06  # ~4 sd of the mean of 2,000 independent pairs
    assert d["lo"] < d["diff"] < d["hi"] and 0.03 < d["hi"] - d["lo"] < 0.1
    assert d["lo"] > 0.1  # excludes no difference
    assert d["p"] < 1e-6
    assert d["wins"] > d["losses"]


def test_no_difference_gives_a_wide_interval_around_zero() -> None:
    rows = _records({"a": 0.5, "b": 0.5}, shared=0.5)
    (d,) = paired_differences(rows, "b", n_boot=500)
    assert d["lo"] < 0.0 < d["hi"]
    assert d["p"] > 0.01


def test_subset_and_determinism() -> None:
    rows = _records({"a": 0.6, "b": 0.4})
    (v,) = paired_differences(rows, "b", subset="victim", n_boot=300, seed=3)
    assert v["n"] == 500
    (v2,) = paired_differences(rows, "b", subset="victim", n_boot=300, seed=3)
    assert v == v2


def test_unpaired_tasks_are_left_out() -> None:
    rows = _records({"a": 0.6, "b": 0.4}, n=10, seeds=1)
    rows = [r for r in rows if not (r["policy"] == "a" and r["step"] == "3")]
    (d,) = paired_differences(rows, "b", n_boot=200)
    assert d["n"] == 9


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"baseline": "nope"}, "no records of baseline 'nope'"),
        ({"baseline": "b", "outcome": "sql"}, "unknown outcome"),
        ({"baseline": "b", "n_boot": 10}, "n_boot"),
        ({"baseline": "b", "subset": "attacker"}, "in subset 'attacker'"),
    ],
)
def test_bad_arguments(kw: dict, msg: str) -> None:
    rows = _records({"a": 0.6, "b": 0.4}, n=10, seeds=1)
    with pytest.raises(InvalidInput, match=msg):
        paired_differences(rows, **kw)


def test_not_a_flag() -> None:
    rows = _records({"a": 0.6, "b": 0.4}, n=4, seeds=1)
    rows[0]["local_ok"] = "maybe"
    with pytest.raises(InvalidInput, match="0/1"):
        paired_differences(rows, "b")


def test_read_records_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="records.csv"):
        read_records([tmp_path])
