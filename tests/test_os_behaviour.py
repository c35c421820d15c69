"""benchmarks/os_behaviour.py: the model-vs-memory profile read from OS bench records."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import os_behaviour  # noqa: E402

FIELDS = ["policy", "local_ok", "sql", "turns", "injected_same_family"]


def _write(path: Path, rows: list[tuple[str, bool, str, int, bool]]) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        for pol, ok, script, turns, same in rows:
            w.writerow([pol, str(ok), script, turns, str(same)])
    return str(path)


def test_profile_splits_by_same_family_injection_and_pools_files(tmp_path: Path) -> None:
    a = _write(
        tmp_path / "a.csv",
        [
            ("no-memory", False, "", 1, False),
            ("no-memory", False, "", 1, False),
            ("keep-all", True, "mkdir /x", 2, True),
            ("keep-all", False, "ls", 3, False),
        ],
    )
    b = _write(tmp_path / "b.csv", [("keep-all", False, "", 1, True)])
    rows = {r[0]: r for r in os_behaviour.profile([a, b])}
    assert rows["no-memory"][1:6] == ["2", "0.000", "0.000", "1.00", "0.000"]
    assert rows["no-memory"][6] == "-"  # no same-family task: no conditional share
    ka = rows["keep-all"]
    assert ka[1] == "3"  # pooled over both files
    assert ka[2] == "0.333" and ka[3] == "0.667" and ka[4] == "2.00"
    assert ka[5] == "0.667"
    assert ka[6] == "0.500" and ka[7] == "0.000"  # acc | same family, acc | other
    assert ka[8] == "0.500" and ka[9] == "1.000"  # acted | same family, acted | other
