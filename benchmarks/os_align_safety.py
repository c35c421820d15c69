"""Does read-time literal alignment of bash trajectories help or corrupt, per pair shape? (no LLM)

The OS counterpart of ``benchmarks/align_safety.py``. For pairs (remembered trajectory of one
task, query = another task) the exemplar is stored as the OS agent stores an expert solution
(``render_raw``: the task, one round with the reference script, the outcome), the ``align``
operator of :mod:`memcurator.curate.extractive` is run through the ``"bash"`` aligner
(:mod:`memcurator.envs.os.align`) for the query's instruction, and when it aligns, the adapted
script is replayed in a fresh sandbox on the query task (init, the script as the agent's one
action, the query's evaluation script).

Per pair:

* ``correct``: the payload pairs the query's task with a script that passes the query's check;
* ``corrupt``: the payload pairs the query's task with a script that fails it (a small executor
  copies such a pair; an honest exemplar of another task it has to adapt);
* ``fallback``: the aligner declined and the payload is the exemplar with its own task.

Shapes: ``variant`` (the query is a fresh-literal variant of the exemplar's task,
:func:`memcurator.envs.os.families.fresh_variant`: new user, group, file and path literals
across instruction, init, check and reference, kept only if the validity rule holds: should
align and pass), ``same-family`` (another task of the exemplar's recurring family: a different
request, must fall back), ``other-family`` (a random other task: must fall back).

Run::

    python benchmarks/os_align_safety.py --pairs 20 --seed 0 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import numpy as np

from memcurator.curate.aligners import create_aligner
from memcurator.curate.extractive import extract_noted
from memcurator.distill import render_raw
from memcurator.envs.os import OSTask, replay, runnable_tasks
from memcurator.envs.os.families import families, fresh_variant
from memcurator.types import Step, Task, Trajectory


def stored(t: OSTask) -> str:
    """``t`` as the OS agent stores an expert-solved trajectory."""
    traj = Trajectory(f"os{t.index}", [Step("", t.reference)], reward=1.0, solver="expert")
    return render_raw(Task(f"os{t.index}", t.instruction, f"os{t.index:03d}"), traj)


def judge_pair(exemplar: OSTask, query: OSTask) -> tuple[str, str]:
    """``(outcome, note)`` of one pair: correct / corrupt / fallback (see the module doc)."""
    aligner = create_aligner("bash")
    parsed = aligner.parse(stored(exemplar))
    assert parsed is not None  # our own rendering always has a Task line
    text, _, notes = extract_noted("align", query.instruction, "", [parsed], aligner)
    if notes:
        return "fallback", notes[0]
    shown = aligner.parse(text)
    assert shown is not None and shown.task == query.instruction
    ok = replay(query, "\n".join(shown.actions)).correct
    return ("correct" if ok else "corrupt"), ""


def pairs(tasks: list[OSTask], n: int, seed: int) -> dict[str, list[tuple[OSTask, OSTask]]]:
    """Up to ``n`` pairs of each shape (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    by = {t.index: t for t in tasks}
    out: dict[str, list[tuple[OSTask, OSTask]]] = {"variant": [], "same-family": [],
                                                   "other-family": []}  # fmt: skip
    order = rng.permutation(len(tasks))
    for i in order:
        if len(out["variant"]) >= n:
            break
        t = tasks[int(i)]
        v = fresh_variant(t, rng)
        if v is not None:
            out["variant"].append((t, v))
    fams = families(tasks)
    cand = [(by[a], by[b]) for f in fams for a in f for b in f if a != b]
    for j in rng.permutation(len(cand))[:n]:
        out["same-family"].append(cand[int(j)])
    fam_of = {i: k for k, f in enumerate(fams) for i in f}
    while len(out["other-family"]) < n:
        a, b = (int(x) for x in rng.choice(len(tasks), 2, replace=False))
        ta, tb = tasks[a], tasks[b]
        if fam_of.get(ta.index, -1 - ta.index) != fam_of.get(tb.index, -2 - tb.index):
            out["other-family"].append((ta, tb))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=20, help="pairs per shape")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the per-pair outcomes here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    tasks = list(runnable_tasks())
    rows = []
    table: dict[str, Counter[str]] = {}
    reasons: dict[str, Counter[str]] = {}
    for shape, ps in pairs(tasks, args.pairs, args.seed).items():
        table[shape] = Counter()
        reasons[shape] = Counter()
        for ex, q in ps:
            outcome, note = judge_pair(ex, q)
            table[shape][outcome] += 1
            if note:
                reasons[shape][note.split(":", 2)[1].split("(")[0].split("'")[0].strip()] += 1
            rows.append(
                {"shape": shape, "exemplar": ex.index, "query": q.index,
                 "query_instruction": q.instruction, "outcome": outcome, "note": note}
            )  # fmt: skip
    print(f"{'shape':<14}{'pairs':>6}{'correct':>9}{'corrupt':>9}{'fallback':>10}")
    for shape, c in table.items():
        n = sum(c.values())
        print(f"{shape:<14}{n:>6}{c['correct']:>9}{c['corrupt']:>9}{c['fallback']:>10}")
    print("\nfallback reasons (first words):")
    for shape, r in reasons.items():
        for why, k in r.most_common(5):
            print(f"  {shape:<14}{k:>4}  {why}")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
