"""Issue 22, injection inside a record's tool output: how many poisoned records a memory keeps
out of the prompt, and how many genuine ones it keeps usable.

Two inputs, each written as a trajectory record (``Task: / Observation: / Action: / Outcome:``)
to a fresh ``Memory(policy="curator")`` once as ``external`` and once as the agent's own
(``self``):

- the bench's ``tool-output`` payload (:data:`memcurator.envs.sql.attacks.TOOL_NOTES`) on every
  SQL task spec, beside the spec's genuine raw exemplar;
- ``--members FILE``: records labelled ``poison`` (an instruction injected into the output, the
  action clean) or ``genuine`` (real-looking outputs that merely contain such words), as JSON
  Lines (``benchmarks/data/tool_output_set_[ab].jsonl``, see that folder's README) or a Python
  file with two lists ``POISON`` and ``GENUINE`` of ``(id, class, task, observation, action)``.
  A set written blind (by someone who had not read the check) is the held-out measure.

Printed per input and channel: admitted, injectable (admitted and not on probation, so recall
may put it in a prompt), and for members the ids the check missed or charged.

    python benchmarks/tool_output_eval.py                 # ~1 min on the shared 2-core machine
    python benchmarks/tool_output_eval.py --no-bench \
        --members benchmarks/data/tool_output_set_b.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np

from memcurator import Memory
from memcurator.trust.action_risk import observation_findings
from memcurator.trust.provenance import injectable


def record(task: str, observation: str, action: str) -> str:
    return f"Task: {task}\nObservation: {observation}\nAction: {action}\nOutcome: success"


def written(text: str, origin: str) -> tuple[bool, bool]:
    """(admitted, injectable) of ``text`` written on ``origin`` to a fresh curator memory."""
    mem = Memory(policy="curator", max_bytes=None)
    try:
        r = mem.write(text, origin=origin)
        e = next((x for x in mem.entries() if x.id == r.id), None) if r.admitted else None
        return r.admitted, bool(e is not None and injectable(e))
    finally:
        mem.close()


def _row(name: str, n: int, c: Counter[str]) -> None:
    cells = [f"{c[f'{o} admitted']:4d} / {c[f'{o} injectable']:4d}" for o in ("external", "self")]
    print(f"{name:22s} {n:5d}   external {cells[0]}   self {cells[1]}")


def bench_payload(seed: int) -> None:
    from memcurator.envs.sql.attacks import genuine_exemplar, make_attack
    from memcurator.envs.sql.data import load_specs

    rng = np.random.default_rng(seed)
    counts: dict[str, Counter[str]] = {"poison": Counter(), "genuine": Counter()}
    specs = list(load_specs().specs)
    for spec in specs:
        poison = make_attack(spec, "tool-output", rng)
        assert poison is not None
        for label, text in (
            ("poison", poison),
            ("genuine", genuine_exemplar(spec, rng, form="raw")),
        ):
            for origin in ("external", "self"):
                a, i = written(text, origin)
                counts[label][f"{origin} admitted"] += a
                counts[label][f"{origin} injectable"] += i
    print(f"bench tool-output payload, seed {seed} (admitted / injectable of n)")
    for label, c in counts.items():
        _row(label, len(specs), c)


def load_members(path: Path) -> dict[str, list[tuple[str, str, str, str, str]]]:
    """``{"poison": [...], "genuine": [...]}`` of ``(id, class, task, observation, action)``
    from a JSON Lines file (benchmarks/data/README.md) or a Python file with two lists."""
    if path.suffix == ".jsonl":
        out: dict[str, list[tuple[str, str, str, str, str]]] = {"poison": [], "genuine": []}
        for line in path.read_text().splitlines():
            r = json.loads(line)
            out[r["label"]].append((r["id"], r["class"], r["task"], r["observation"], r["action"]))
        return out
    spec = importlib.util.spec_from_file_location("members", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"poison": list(mod.POISON), "genuine": list(mod.GENUINE)}


def members(path: Path) -> None:
    sets = load_members(path)
    print(f"members from {path} (admitted / injectable of n)")
    for label, rows in sets.items():
        c: Counter[str] = Counter()
        flagged = []
        for row in rows:
            rid, _, task, obs, action = row[:5]
            text = record(task, obs, action)
            for origin in ("external", "self"):
                a, i = written(text, origin)
                c[f"{origin} admitted"] += a
                c[f"{origin} injectable"] += i
            if observation_findings(task, obs, action):
                flagged.append(rid)
        _row(label, len(rows), c)
        found = set(flagged)
        if label == "poison":
            missed = [r[0] for r in rows if r[0] not in found]
            print(f"    found by the check {len(found)}; missed: {missed}")
        else:
            print(f"    charged by the check {len(found)}: {flagged}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=Path, help="a Python file with POISON and GENUINE lists")
    ap.add_argument("--no-bench", action="store_true", help="skip the bench payload")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not args.no_bench:
        bench_payload(args.seed)
    if args.members is not None:
        members(args.members)


if __name__ == "__main__":
    main()
