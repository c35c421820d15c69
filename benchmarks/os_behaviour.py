"""What the model does on OS tasks, per policy, from a bench's ``records.csv`` (no LLM is run).

Separates the model's ability from the memory's effect (issue 23): a policy's accuracy is
the product of whether the model acts at all in the protocol (a ``bash`` block that runs),
whether memory showed it a trajectory of the same family, and whether it then solves the task.

Usage::

    python benchmarks/os_behaviour.py RUN/records.csv [RUN2/records.csv ...]

Columns (per policy, pooled over the seeds in the files):

- ``tasks``: records; ``acc``: share solved by the local model (``local_ok``);
- ``acted``: share of tasks in which at least one bash command ran (``sql`` holds the last
  executed script; empty when the model never produced a runnable ``Act: bash`` reply);
- ``rounds``: mean agent rounds (``turns``; upstream allows 5);
- ``same_fam``: share of tasks whose prompt held a trajectory of the task's own family;
- ``acc|same_fam`` and ``acc|other``: accuracy on those tasks and on the rest;
- ``acted|same_fam`` and ``acted|other``: the same split for ``acted``.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict


def _share(rows: list[dict[str, str]], key: str) -> str:
    if not rows:
        return "-"
    return f"{sum(r[key] == 'True' for r in rows) / len(rows):.3f}"


def _acted(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "-"
    return f"{sum(bool(r['sql'].strip()) for r in rows) / len(rows):.3f}"


def profile(paths: list[str]) -> list[list[str]]:
    """One row per policy (first-seen order): the columns of the module docstring."""
    by: dict[str, list[dict[str, str]]] = defaultdict(list)
    for p in paths:
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                by[r["policy"]].append(r)
    out = []
    for pol, rows in by.items():
        same = [r for r in rows if r["injected_same_family"] == "True"]
        other = [r for r in rows if r["injected_same_family"] != "True"]
        rounds = sum(int(r["turns"] or 0) for r in rows) / len(rows)
        out.append(
            [
                pol,
                str(len(rows)),
                _share(rows, "local_ok"),
                _acted(rows),
                f"{rounds:.2f}",
                f"{len(same) / len(rows):.3f}",
                _share(same, "local_ok"),
                _share(other, "local_ok"),
                _acted(same),
                _acted(other),
            ]
        )
    return out


HEAD = [
    "policy",
    "tasks",
    "acc",
    "acted",
    "rounds",
    "same_fam",
    "acc|same_fam",
    "acc|other",
    "acted|same_fam",
    "acted|other",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records", nargs="+", help="records.csv files of `memcurator bench --env os`")
    args = ap.parse_args()
    rows = profile(args.records)
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
