"""Compare two bench runs task by task: which (policy, seed, step) records differ, and in what.

    python benchmarks/diff_records.py OLD/records.csv NEW/records.csv [--ignore COL ...]

``mem_s`` (time spent in memcurator) is always ignored: it is a measured duration. A rerun from
the completion cache also differs in ``cached`` (now a hit) and, for prompts another process
answered first, in the replayed ``llm_s``; pass ``--ignore cached llm_s`` to see decisions only.
Prints, per policy, the number of differing records and the first one's step and columns.
"""

from __future__ import annotations

import argparse
import csv


def load(path: str) -> dict[tuple[str, str, str], dict[str, str]]:
    with open(path, newline="") as f:
        return {(r["policy"], r["seed"], r["step"]): r for r in csv.DictReader(f)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--ignore", nargs="*", default=[], help="columns to ignore besides mem_s")
    args = ap.parse_args()
    a, b = load(args.old), load(args.new)
    skip = {"mem_s", *args.ignore}
    common = sorted(set(a) & set(b))
    print(f"records: {len(a)} old, {len(b)} new, {len(common)} in both")
    diff: dict[str, list[tuple[str, list[str]]]] = {}
    for k in common:
        cols = [c for c in a[k] if c in b[k] and c not in skip and a[k][c] != b[k][c]]
        if cols:
            diff.setdefault(k[0], []).append((k[2], cols))
    for pol in sorted({k[0] for k in common}):
        d = diff.get(pol, [])
        first = f"  first: step {d[0][0]} {d[0][1]}" if d else ""
        print(f"{pol:24s} differing records: {len(d)}{first}")


if __name__ == "__main__":
    main()
