"""Feasibility of a learned harm head (issue 22, item 5), leave-one-set-out; nothing is shipped.

A logistic regression (numpy, L2, full-batch gradient descent) on hashed word uni- and bigrams
(2^18 buckets, signed, L2-normalised per item) is fitted on four of the five sets (asb, bipia,
ramdocs, nq, sql; balanced by re-weighting) and scored on the fifth. It prints the held-out
ROC-AUC per set, and for asb a task-matched check: the held-out AUC on the items of the tasks
(``target_query``) that have both poison and genuine items, so that "which task" cannot be the
signal (asb's two classes come mostly from different models; style can still be). A head that
only works on the sets it saw is no harm head.

    python benchmarks/harm_head_loso.py [--n 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import re
import zlib

import numpy as np
from trust_eval import SETS, load_set  # type: ignore[import-not-found]

DIM = 1 << 18
_W = re.compile(r"[a-z0-9]+")


def features(text: str) -> dict[int, float]:
    w = _W.findall(text.lower())
    toks = w + [a + " " + b for a, b in zip(w, w[1:], strict=False)]
    out: dict[int, float] = {}
    for t in toks:
        h = zlib.crc32(t.encode())
        j, s = h % DIM, 1.0 if (h >> 31) & 1 else -1.0
        out[j] = out.get(j, 0.0) + s
    n = np.sqrt(sum(v * v for v in out.values())) or 1.0
    return {j: v / n for j, v in out.items()}


def to_csr(rows: list[dict[int, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = np.concatenate([np.fromiter(r.keys(), int, len(r)) for r in rows])
    val = np.concatenate([np.fromiter(r.values(), float, len(r)) for r in rows])
    ptr = np.cumsum([0] + [len(r) for r in rows])
    return idx, val, ptr


def dot(csr: tuple, w: np.ndarray) -> np.ndarray:
    idx, val, ptr = csr
    return np.add.reduceat(val * w[idx], ptr[:-1]) if len(idx) else np.zeros(len(ptr) - 1)


def fit(csr: tuple, y: np.ndarray, sw: np.ndarray, lam: float = 1e-4, steps: int = 300) -> tuple:
    idx, val, ptr = csr
    w = np.zeros(DIM)
    b = 0.0
    rows = np.repeat(np.arange(len(y)), np.diff(ptr))
    lr = 2.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(dot(csr, w) + b)))
        g = sw * (p - y)
        gw = np.zeros(DIM)
        np.add.at(gw, idx, val * g[rows])
        w -= lr * (gw / sw.sum() + lam * w)
        b -= lr * g.sum() / sw.sum()
    return w, b


def auc(score: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(score)
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    pos = y == 1
    n1, n0 = pos.sum(), (~pos).sum()
    if not n1 or not n0:
        return float("nan")
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = {}
    for s in SETS:
        gen, poi = load_set(s, args.n, args.seed)
        data[s] = (gen + poi, np.array([0] * len(gen) + [1] * len(poi), dtype=float))
    for held in SETS:
        tr = [it for s in SETS if s != held for it in data[s][0]]
        ytr = np.concatenate([data[s][1] for s in SETS if s != held])
        sw = np.where(ytr == 1, 0.5 / ytr.mean(), 0.5 / (1 - ytr.mean()))
        w, b = fit(to_csr([features(it.text) for it in tr]), ytr, sw)
        its, y = data[held]
        sc = dot(to_csr([features(it.text) for it in its]), w) + b
        print(f"held out {held:8s} AUC {auc(sc, y):.3f}  (n={len(y)})", flush=True)
        if held == "asb":
            tg = {it.target_query for it, v in zip(its, y, strict=True) if v == 0}
            tp = {it.target_query for it, v in zip(its, y, strict=True) if v == 1}
            m = np.array([it.target_query in tg & tp for it in its])
            print(
                f"  asb task-matched ({len(tg & tp)} tasks with both classes, n={m.sum()}): "
                f"AUC {auc(sc[m], y[m]):.3f}"
            )


if __name__ == "__main__":
    main()
