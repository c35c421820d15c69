"""Cost of the TokenWorth learner per task at bank sizes 64, 1k and 10k (a benchmark, not a test).

Per task the engine (TokenWorth, Sec. 4.1 / App. B.3) builds the learner inputs for the K_c = 12
BM25 candidates, scores them, injects the best one and learns from its outcome; the lifecycle
(Sec. 4.4) needs the worth of the whole bank under a few probe queries. This script times:

- ``update``: one ``learn_one`` (amortized over the scheduled base / KRR / AGOP refits; the
  refit steps themselves are also reported as ``update max``),
- ``score K_c=12``: ``features_many`` + ``score_many`` over 12 candidates,
- ``score bank``: the same over every resident,
- ``probe bank (p=8)``: ``probe_worths`` for 8 probe queries over every resident (what one
  full-bank lifecycle decision costs).

Embeddings are random unit vectors of dimension 512 (the hashing embedder's size; embedding
cost is not the learner's). Candidates are the 12 residents most cosine-similar to the query, a
stand-in for BM25 recall whose time is excluded. The learner is warmed with 600 feedback
examples so that KRR (128 points) and the AGOP metric are in place.

Run: ``python benchmarks/tokenworth_learner.py [--tasks 200] [--seed 0]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from memcurator.value.tokenworth import MemoryStats, TokenWorthLearner, features_many
from memcurator.value.tokenworth_lifecycle import probe_worths

DIM, K_C, N_PROBES, WARM = 512, 12, 8, 600
SIZES = (64, 1_000, 10_000)


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def run(size: int, tasks: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    bank = unit(rng, size)
    stats = [
        MemoryStats(int(s), int(f), int(s + f), int(a))
        for s, f, a in zip(
            rng.poisson(2, size), rng.poisson(1, size), rng.integers(0, 300, size), strict=True
        )
    ]
    learner = TokenWorthLearner(seed=seed)
    for _ in range(WARM):  # warm-up feedback on random pairs
        q = unit(rng, 1)[0]
        j = int(rng.integers(size))
        x = features_many(q, bank[j : j + 1], [stats[j]])[0]
        learner.learn_one(x, float(rng.choice([-1.0, 1.0])))

    t_upd, t_k, t_bank, t_probe = [], [], [], []
    for _ in range(tasks):  # the per-task path: score K_c candidates, learn from the injected one
        q = unit(rng, 1)[0]
        cand = np.argsort(-(bank @ q))[:K_C]  # recall stand-in, not timed
        t0 = time.perf_counter()
        xs = features_many(q, bank[cand], [stats[i] for i in cand])
        scores = learner.score_many(xs)
        t_k.append(time.perf_counter() - t0)
        best = int(np.argmax(scores))
        t0 = time.perf_counter()
        learner.learn_one(xs[best], float(rng.choice([-1.0, 1.0])))
        t_upd.append(time.perf_counter() - t0)
    # whole-bank paths, timed separately so their garbage does not land on the per-task path
    for _ in range(max(3, min(tasks, 20_000 // size))):
        q = unit(rng, 1)[0]
        t0 = time.perf_counter()
        learner.score_many(features_many(q, bank, stats))
        t_bank.append(time.perf_counter() - t0)
    for _ in range(max(3, min(tasks // 4, 4_000 // size))):
        probes = unit(rng, N_PROBES)
        t0 = time.perf_counter()
        probe_worths(learner, probes, bank, stats)
        t_probe.append(time.perf_counter() - t0)
    ms = 1e3
    return {
        "update mean": float(np.mean(t_upd)) * ms,
        "update max": float(np.max(t_upd)) * ms,
        "score K_c=12": float(np.median(t_k)) * ms,
        "score bank": float(np.median(t_bank)) * ms,
        "probe bank (p=8)": float(np.median(t_probe)) * ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200, help="tasks per bank size (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = {size: run(size, args.tasks, args.seed) for size in SIZES}
    cols = list(rows[SIZES[0]])
    print(
        f"TokenWorth learner cost per task, ms ({args.tasks} tasks, d={DIM}, after {WARM} "
        "warm-up examples); (xN) = ratio to the 64-entry bank"
    )
    head = f"{'bank size':>10} | " + " | ".join(f"{c:>20}" for c in cols)
    print(head)
    print("-" * len(head))
    for size, r in rows.items():
        cells = [f"{r[c]:9.3f} (x{r[c] / rows[SIZES[0]][c]:6.1f})" for c in cols]
        print(f"{size:>10} | " + " | ".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
