"""Why do post-drift (victim) tasks miss a current exemplar? (issue 11, cause 5)

Replays policies on one bench stream and, before every victim task (a post-drift task of a
migrated family), looks at the resident set: is a *current* same-family entry (written after the
migration) resident, is a *stale* one, which one was injected, and what ρ's terms say of each
(CURATOR: propensity p, helpfulness q, harm η, provenance π, ρ). Afterwards it counts how the
migrated families' current entries left memory (by the decision log's reason), and how many of
their writes were rejected.

    python benchmarks/drift_diagnosis.py --policies curator,success-only --tasks 300 --seed 1 \
        --dml-share 0.8 --drift-popular --executor fake

Offline only: ``--executor fake`` (scripted) or ``cache-only`` (completion cache, a miss is an
error). Numbers from a run, not a test.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from typing import Any

import numpy as np

import memcurator.bench.agent as agent
from memcurator.bench.runner import BenchConfig, _oracle, load_families
from memcurator.bench.stream import StreamConfig, build_stream
from memcurator.memory import Memory
from memcurator.policy import create_policy


def diagnose(name: str, cfg: BenchConfig, seed: int, ex: Any, fams: list[Any]) -> dict[str, Any]:
    """Replay ``name`` on seed ``seed`` and collect the victim-task diagnosis."""
    scfg = StreamConfig(**{**cfg.stream.__dict__, "seed": seed})
    stream = build_stream(scfg, fams)
    policy = create_policy(name)
    mem = Memory(
        ":memory:", namespace=name, policy=policy,
        max_bytes=cfg.max_bytes if policy.bounded else None, seed=seed,
    )  # fmt: skip
    policy.set_budget(mem.max_bytes)
    injected: list[list[str]] = []
    original = agent.memory_block

    def spy(entries, budget):  # type: ignore[no-untyped-def]
        block, used = original(entries, budget)
        injected.append(list(used))
        return block, used

    agent.memory_block = spy
    ds = stream.drift_step
    known: dict[str, tuple[str, int]] = {}  # id -> (family, created step) of every write
    write = mem.write

    eta_at_write: dict[str, list[float]] = defaultdict(list)

    def spy_write(text: Any, **kw: Any) -> Any:  # entries evicted in their own write count too
        fam = str((kw.get("meta") or {}).get("family"))
        if "rho" in getattr(policy, "_estimators", {}) and mem.step >= ds and len(mem):
            # the candidate's harm eta against the residents', before the write (percentile)
            from memcurator.types import Entry as _E

            e = mem.embedder.embed(text)
            cand = _E("cand", "ns", "raw", text, 1, 1, e)
            allm = mem.entries()
            t = policy.terms([*allm, cand], np.vstack([mem.matrix, e]))
            pct = float(np.mean(t.eta[:-1] < t.eta[-1]))
            eta_at_write["migrated" if fam in stream.drifted else "other"].append(pct)
        r = write(text, **kw)
        if r.id is not None:
            known.setdefault(r.id, (str((kw.get("meta") or {}).get("family")), mem.step))
        return r

    mem.write = spy_write  # type: ignore[method-assign]
    rows: list[dict[str, Any]] = []
    terms: dict[str, list[list[float]]] = defaultdict(list)
    try:
        for step, task in enumerate(stream.tasks):
            if stream.poison is not None and step == stream.poison.step:
                for text, fam in zip(stream.poison.texts, stream.poison.targets, strict=True):
                    mem.write(text, origin="external", kind="insight", origin_detail="attacker",
                              meta={"poison": True, "family": fam})  # fmt: skip
            policy.set_oracle(_oracle(task.family, step, stream.drifted, ds))
            row: dict[str, Any] = {}
            if task.subset == "victim":
                ents = [m for m in mem.entries() if m.meta.get("family") == task.family]
                cur = [m for m in ents if m.created_step >= ds and not m.meta.get("poison")]
                stale = [m for m in ents if m.created_step < ds]
                row = {"cur": len(cur), "stale": len(stale), "cur_ids": {m.id for m in cur},
                       "stale_ids": {m.id for m in stale}}  # fmt: skip
                if "rho" in getattr(policy, "_estimators", {}) and ents:
                    allm = mem.entries()
                    t = policy.terms(allm, mem.matrix)
                    idx = {m.id: i for i, m in enumerate(allm)}
                    rank = np.argsort(np.argsort(-t.rho))  # 0 = best ρ
                    for kind, group in (("current", cur), ("stale", stale)):
                        for m in group:
                            i = idx[m.id]
                            terms[kind].append(
                                [t.p[i], t.q[i], t.eta[i], t.pi[i], t.rho[i] * 1e4,
                                 rank[i] / max(len(allm) - 1, 1)]
                            )  # fmt: skip
            rec = agent.run_task(task, mem, ex, cfg.agent, policy_name=name, seed=seed, step=step)
            if row:
                used = set(injected[-1])
                row["inj_cur"] = bool(used & row["cur_ids"])
                row["inj_stale"] = bool(used & row["stale_ids"])
                row["ok"] = rec.local_ok
                rows.append(row)
    finally:
        agent.memory_block = original
    # how current entries of migrated families left memory, and with whom they were redundant
    gone: Counter[str] = Counter()
    rejects = 0
    for d in mem.decisions():
        fam, created = known.get(d.entry_id, ("?", -1))
        if d.action == "reject" and d.step >= ds and "duplicate" in d.reason:
            rejects += 1
        if d.action != "evict" or fam not in stream.drifted or created < ds:
            continue
        if d.reason.startswith(("redundant", "superseded")):
            # "... same request as newer|older resident <id> (...)" (lifecycle.keep)
            dup = d.reason.split(" resident ", 1)[-1].split(" ", 1)[0]
            dfam, dcreated = known.get(dup, ("?", -1))
            what = (
                "same family, stale"
                if dfam == fam and dcreated < ds
                else ("same family, current" if dfam == fam else "other family")
            )
            gone[f"{d.reason.split(':', 1)[0]} by {what}"] += 1
        elif d.step == created and d.reason.startswith("lowest"):
            # ranked last the moment it was written: its q starts near 0 and a positive harm
            # term makes its net value negative (a hard family's new exemplar, seed 1)
            gone["lowest rho at its own write"] += 1
        else:
            gone[d.reason.split(" when")[0][:40]] += 1
    mem.close()
    n = len(rows)

    def share(k: str) -> float:
        return float(np.mean([r[k] for r in rows])) if rows else float("nan")

    return {
        "policy": name,
        "seed": seed,
        "victims": n,
        "cur_resident": float(np.mean([r["cur"] > 0 for r in rows])) if rows else float("nan"),
        "stale_resident": float(np.mean([r["stale"] > 0 for r in rows])) if rows else float("nan"),
        "inj_cur": share("inj_cur"),
        "inj_stale": share("inj_stale"),
        "acc": share("ok"),
        "terms": {k: np.mean(v, axis=0).round(3).tolist() for k, v in terms.items() if v},
        "post_drift_evictions": dict(gone.most_common(4)),
        "dup_rejects": rejects,
        "eta_pct": {k: round(float(np.mean(v)), 3) for k, v in eta_at_write.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="curator,success-only,keep-all")
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--max-bytes", type=int, default=100_000)
    ap.add_argument("--dml-share", type=float, default=None)
    ap.add_argument("--drift-popular", action="store_true")
    ap.add_argument("--drift", type=float, default=0.3)
    ap.add_argument("--executor", choices=("fake", "cache-only"), default="fake")
    args = ap.parse_args()
    from injection_diagnosis import make_executor  # the same executors, cache-only guarded

    ex = make_executor(args.executor, None)
    cfg = BenchConfig(
        policies=args.policies.split(","),
        stream=StreamConfig(n_tasks=args.tasks, dml_share=args.dml_share,
                            drift_popular=args.drift_popular, drift=args.drift),
        max_bytes=args.max_bytes,
    )  # fmt: skip
    fams = load_families()
    print(
        "| policy | seed | victims | current resident | stale resident | current injected "
        "| stale injected | victim acc | evictions of migrated families' current entries "
        "| dup rejects |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_terms = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for p in cfg.policies:
            r = diagnose(p, cfg, seed, ex, fams)
            print(
                f"| {p} | {seed} | {r['victims']} | {r['cur_resident']:.2f} | "
                f"{r['stale_resident']:.2f} | {r['inj_cur']:.2f} | {r['inj_stale']:.2f} | "
                f"{r['acc']:.3f} | {r['post_drift_evictions']} | {r['dup_rejects']} |"
            )
            if r["terms"]:
                all_terms.append((p, seed, r["terms"]))
            if r["eta_pct"]:
                print(f"<!-- {p} seed {seed}: post-drift writes' harm eta, percentile among "
                      f"residents at write: {r['eta_pct']} -->")  # fmt: skip
    print("\nrho terms of the victim's family entries at victim steps (mean): "
          "[p, q, eta, pi, rho x 1e4, rank share (0 = best)]")  # fmt: skip
    for p, seed, t in all_terms:
        print(f"  {p} seed {seed}: " + "; ".join(f"{k} {v}" for k, v in t.items()))


if __name__ == "__main__":
    main()
