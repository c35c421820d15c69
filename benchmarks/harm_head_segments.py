"""Issue 22, direction 4: a learned injection head over segments, leave-one-set-out.

An experiment, not shipped: it decides whether a learned head (CURATOR (000) Sec. III-C, the
harm head H) is worth wiring into the gate for the channel that content alone must guard
(plain ``self``: an undeclared, unobserved write). It needs scikit-learn, which the project
does not depend on (``pip install scikit-learn``). ``benchmarks/harm_head_loso.py`` (session 9)
scored whole entries with hashed features and found held-out AUC 0.43–0.75; this one asks
whether scoring segments, with the injected text alone as the positives, does better.

The head scores one sentence or line at a time (an entry scores as its worst segment), so it can
learn the injected instruction rather than the style of the source around it (the attack set
README's trap: asb's poison and benign records come mostly from different models). Positives are
the injected text only: BIPIA's ``attack_str`` and, in asb's poison records, the segments that
name the attacker's tool or carry the "ignore previous instructions" / "task complete" frame.
Negatives are every benign segment of all sets, and the false-fact passages (ramdocs, nq poison),
which instruct nothing. TF-IDF on word 1–2-grams, class-balanced logistic regression.

For each shipped set with positives (asb, bipia) the head is fitted on the other sets and its
threshold chosen on them (the lowest score at which at most 2% of their benign entries score
above it); it is then measured on the left-out set's poison and benign entries. The held-out
sets (agentdojo, garak; ``benchmarks/heldout_sets.py``) are measured with the head fitted on all
shipped sets.

    python benchmarks/harm_head_segments.py       # ~30 s on the shared 2-core machine

Result (session 13, seed 0, 300 poison/up to 300 benign per set): docs/trust.md, "A learned
injection head, leave-one-set-out".
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ATTACKS = ROOT.parent / "shared" / "data" / "attacks"
NQ = ROOT.parent / "shared" / "data" / "poisonedrag" / "adv_targeted_nq.json"
HELDOUT = Path.home() / ".cache" / "memcurator" / "heldout"
MAX_BENIGN_FPR = 0.02


def segments(text: str) -> list[str]:
    """Lines and sentences of ``text`` with at least three words."""
    parts = re.split(r"\n+|(?<=[.!?;])\s+(?=[A-Z\[{<'\"])", text)
    return [p.strip() for p in parts if len(re.findall(r"\w+", p)) >= 3]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def training_segments() -> dict[str, tuple[list[str], list[str], list[dict[str, Any]]]]:
    """Set name -> (positive segments, negative segments, its entries)."""
    out: dict[str, tuple[list[str], list[str], list[dict[str, Any]]]] = {}
    asb = _rows(ATTACKS / "asb_memory_poison.jsonl")
    pos, neg = [], []
    for r in asb:
        segs = segments(r["text"])
        if r["label"] == "poison":
            tool = r["meta"]["attacker_tool"].lower()
            frame = ("ignore previous", "task complete")
            pos += [s for s in segs if tool in s.lower() or any(f in s.lower() for f in frame)]
        else:
            neg += segs
    out["asb"] = (pos, neg, asb)
    bip = _rows(ATTACKS / "bipia_indirect_injection_train.jsonl")
    pos, neg = [], []
    for r in bip:
        if r["label"] == "poison":
            pos += segments(r["meta"]["attack_str"])
        else:
            neg += segments(r["text"])
    out["bipia"] = (pos, neg, bip)
    ram = _rows(ATTACKS / "ramdocs_false_fact.jsonl")
    out["ramdocs"] = ([], [s for r in ram for s in segments(r["text"])], ram)
    nq = json.loads(NQ.read_text())
    neg = []
    for v in nq.values():
        neg += segments(f"Question: {v['question']}\nAnswer: {v['correct answer']}")
        neg += [s for t in v["adv_texts"] for s in segments(t)]
    out["nq"] = ([], neg, [])
    return out


class Head:
    """TF-IDF + logistic regression over segments; an entry scores as its worst segment."""

    def __init__(self, pos: list[str], neg: list[str], c: float) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        pos, neg = list(dict.fromkeys(pos)), list(dict.fromkeys(neg))
        self.vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        x = self.vec.fit_transform(pos + neg)
        y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
        self.lr = LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x, y)

    def score(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            segs = segments(t) or [t]
            out.append(float(self.lr.predict_proba(self.vec.transform(segs))[:, 1].max()))
        return np.asarray(out)


def _split(rows: list[dict[str, Any]], n: int, rng: np.random.Generator) -> tuple[list, list]:
    poi = [r["text"] for r in rows if r["label"] == "poison"]
    ben = [r["text"] for r in rows if r["label"] == "benign"]
    pick = lambda xs: [xs[i] for i in sorted(rng.permutation(len(xs))[:n])]  # noqa: E731
    return pick(poi), pick(ben)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="entries of each label per set")
    ap.add_argument("--c", type=float, default=4.0, help="inverse L2 strength")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SystemExit("this experiment needs scikit-learn: pip install scikit-learn") from None
    data = training_segments()
    rng = np.random.default_rng(args.seed)
    print(
        f"{'set':10s} {'fitted on':26s} {'thr':>5s} {'poison flagged':>15s} {'benign flagged':>15s}"
    )

    def fit(names: list[str]) -> tuple[Head, float]:
        head = Head(
            [s for k in names for s in data[k][0]], [s for k in names for s in data[k][1]], args.c
        )
        ben = [r["text"] for k in names for r in data[k][2] if r["label"] == "benign"]
        sb = head.score([ben[i] for i in rng.permutation(len(ben))[: 4 * args.n]])
        return head, float(np.quantile(sb, 1.0 - MAX_BENIGN_FPR))

    shipped = list(data)
    for left in ("asb", "bipia"):
        names = [k for k in shipped if k != left]
        head, thr = fit(names)
        poi, ben = _split(data[left][2], args.n, rng)
        fp, fb = np.mean(head.score(poi) > thr), np.mean(head.score(ben) > thr)
        print(f"{left:10s} {','.join(names):26s} {thr:5.2f} {fp:15.1%} {fb:15.1%}")
    head, thr = fit(shipped)
    for name in ("agentdojo", "garak"):
        path = HELDOUT / f"{name}.jsonl"
        if not path.exists():
            print(f"{name:10s} (run benchmarks/heldout_sets.py --package all first)")
            continue
        poi, ben = _split(_rows(path), args.n, rng)
        fp, fb = np.mean(head.score(poi) > thr), np.mean(head.score(ben) > thr)
        print(f"{name:10s} {'all shipped':26s} {thr:5.2f} {fp:15.1%} {fb:15.1%}")


if __name__ == "__main__":
    main()
