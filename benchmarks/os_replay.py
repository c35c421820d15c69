"""Replay every OS task's reference in the project's sandbox: the generator's validity rule.

For each task: sandbox A runs init then the check (it must fail); sandbox B runs init, the
reference as the agent's one bash action, then the check (it must pass). Writes one CSV row per
task and prints the counts and the time per task.

Usage::

    python benchmarks/os_replay.py --out /tmp/os_replay.csv [--tasks 0-499] [--mode shifted]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time

from memcurator.envs.os.data import load_os_tasks
from memcurator.envs.os.protocol import check_validity
from memcurator.envs.os.sandbox import SandboxConfig


def parse_range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="0-499")
    ap.add_argument("--mode", default="shifted", choices=["shifted", "identity"])
    args = ap.parse_args()
    tasks = {t.index: t for t in load_os_tasks()}
    cfg = SandboxConfig(mode=args.mode)
    rows = []
    t0 = time.monotonic()
    for i in parse_range(args.tasks):
        v = check_validity(tasks[i], cfg)
        ref = v.reference
        rows.append(
            {
                "task": i,
                "init_ok": v.init_ok,
                "fails_before": v.fails_before,
                "passes_after": v.passes_after,
                "valid": v.valid,
                "reference_exit": "" if ref is None else ref.exit_code,
                "seconds_b": round(v.seconds, 3),
                "reference_output": "" if ref is None else ref.output[:300],
            }
        )
    wall = time.monotonic() - t0
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    secs = [r["seconds_b"] for r in rows]
    n = len(rows)
    print(
        f"{n} tasks ({args.mode}): init ok {sum(r['init_ok'] for r in rows)}, check fails "
        f"before {sum(r['fails_before'] for r in rows)}, reference passes "
        f"{sum(r['passes_after'] for r in rows)}, valid {sum(r['valid'] for r in rows)}; "
        f"sandbox B mean {statistics.mean(secs):.2f} s, median {statistics.median(secs):.2f} s, "
        f"max {max(secs):.2f} s; wall {wall:.0f} s"
    )
    print("not valid:", [r["task"] for r in rows if not r["valid"]])


if __name__ == "__main__":
    main()
