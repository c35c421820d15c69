"""Offline (no LLM) evaluation of the trust gate: admission of genuine vs poison entries.

SQL: genuine exemplars and six attack payloads on three channels (memcurator.envs.sql.attacks);
self entries of the owner are signed, forged-self attacks are not (downgraded to external by the
key ring); a compromised peer signs its attacks with its real key and advertises q=1, a=50.
Entries arrive in a seeded random order; each is checked against its 10 nearest admitted
entries (HashingEmbedder cosine) for conflicts.

PoisonedRAG nq: targets split 50/50 by a fixed seed (tune / held-out). Genuine entries are
"Question: q\\nAnswer: correct" written as external; poison = the 5 adversarial passages per
target, external. Three arrival orders (genuine first, poison first, interleaved). Retrieval
ASR@5: fraction of target questions whose top-5 (cosine over the admitted set) holds a poison
passage. The ablation ``no-passage-prior`` drops the structure prior to show what the content
features alone do.

With ``--via memory`` every entry goes through ``Memory`` (policy ``curator``: the trust gate
as wired, with a key ring): the owner's genuine self entries are signed with ``Memory.sign``,
forged-self attacks are written unsigned, peer entries arrive through ``Memory.receive`` signed
by their peer (a compromised one advertising q = 1, a = 50), and nq's ASR@5 is read from
``Memory.recall(question, k=5)`` (BM25 + dense + the policy's rerank).

    python benchmarks/trust_eval.py [--families 150] [--seed 0] [--via gate|memory]
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

import numpy as np

from memcurator import Memory
from memcurator.embed.hashing import HashingEmbedder
from memcurator.envs.sql import load_specs
from memcurator.envs.sql.attacks import outside_traffic
from memcurator.policy.share import SharedEntry
from memcurator.trust.auth import OWNER, Claim, KeyRing
from memcurator.trust.gate import assess
from memcurator.trust.reputation import PeerReputation

NQ = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "poisonedrag"


class _Admitted:
    """Admitted entries with their embeddings, for neighbours and recall."""

    def __init__(self, emb: HashingEmbedder):
        self.emb = emb
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.vecs: list[np.ndarray] = []

    def neighbours(self, v: np.ndarray, k: int = 10) -> list[tuple[str, str]]:
        if not self.ids:
            return []
        sims = np.stack(self.vecs) @ v
        top = np.argsort(-sims)[:k]
        return [(self.ids[i], self.texts[i]) for i in top]

    def add(self, eid: str, text: str, v: np.ndarray) -> None:
        self.ids.append(eid)
        self.texts.append(text)
        self.vecs.append(v)


def _sql_setup(n_families: int, seed: int) -> tuple[list, np.ndarray, KeyRing, np.random.Generator]:
    """The outside traffic of ``n_families`` families, its order, and the key ring (the owner,
    a good peer and a compromised one that holds a real key); both evaluations start here."""
    specs = list(load_specs().specs)
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(specs))[:n_families]
    traffic = outside_traffic([specs[i] for i in pick], rng)
    order = rng.permutation(len(traffic))
    ring = KeyRing()
    ring.add(OWNER)
    ring.add("peer-good")
    ring.add("peer-bad")
    return traffic, order, ring, rng


def sql_eval(n_families: int, seed: int) -> dict:
    traffic, order, ring, rng = _sql_setup(n_families, seed)
    rep = PeerReputation()
    emb = HashingEmbedder()
    adm = _Admitted(emb)
    counts: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    shrunk = []
    t0 = time.perf_counter()
    for j in order:
        e = traffic[int(j)]
        detail = {"self": "", "peer": "peer-good" if e.genuine else "peer-bad", "external": "feed"}
        claim = Claim("agent", e.channel, detail[e.channel], e.kind, e.text)
        sig = None
        if e.channel == "self" and e.genuine:
            sig = ring.sign(claim)  # the owner's own write
        elif e.channel == "peer":
            sig = ring.sign(claim)  # the (possibly compromised) peer signs with its key
        ver = ring.verify(claim, sig)
        if e.channel == "peer":
            shrunk.append((e.genuine, rep.shrink_q(detail["peer"], e.q_adv, 0.0)))
        v = emb.embed(e.text)
        a = assess(
            e.text,
            origin=ver.trusted_origin,
            residents=adm.neighbours(v),
            embed=emb,
            new_id=f"e{j}",
        )
        c = counts[(e.channel, e.payload)]
        c[0] += int(a.admit)
        c[1] += 1
        if a.admit:
            adm.add(f"e{j}", e.text, v)
    dt = time.perf_counter() - t0
    return {
        **_sql_summary(counts, n_families, len(traffic), dt),
        "peer_q_after_shrink_mean": {
            "genuine": float(np.mean([q for g, q in shrunk if g])),
            "attack": float(np.mean([q for g, q in shrunk if not g])),
        },
    }


def _memory(ring: KeyRing, policy: str = "curator") -> Memory:
    return Memory(policy=policy, namespace="agent", keyring=ring, max_bytes=None)


def sql_eval_memory(n_families: int, seed: int) -> dict:
    """:func:`sql_eval` through ``Memory`` (the trust gate as wired into ``curator``)."""
    traffic, order, ring, rng = _sql_setup(n_families, seed)
    mem = _memory(ring)
    counts: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    t0 = time.perf_counter()
    for j in order:
        e = traffic[int(j)]
        if e.channel == "peer":
            peer = "peer-good" if e.genuine else "peer-bad"
            sig = ring.sign(Claim("agent", "peer", peer, e.kind, e.text), principal=peer)
            s = SharedEntry(e.text, e.kind, 0, e.q_adv, max(1.0, e.a_adv), 0.0, "x", signature=sig)
            (r,) = mem.receive([s], peer=peer)
        elif e.channel == "self" and e.genuine:
            r = mem.write(e.text, kind=e.kind, signature=mem.sign(e.text, kind=e.kind))
        else:  # external, or a forged self claim (no owner signature)
            r = mem.write(e.text, origin=e.channel, kind=e.kind, origin_detail="attacker")
        c = counts[(e.channel, e.payload)]
        c[0] += int(r.admitted)
        c[1] += 1
    dt = time.perf_counter() - t0
    return _sql_summary(counts, n_families, len(traffic), dt)


def _sql_summary(counts: dict, n_families: int, n: int, dt: float) -> dict:
    rows = {
        f"{ch}/{p}": {"admitted": c[0], "n": c[1], "rate": c[0] / c[1]}
        for (ch, p), c in sorted(counts.items())
    }
    gen = [c for (ch, p), c in counts.items() if p == "genuine"]
    poi = [c for (ch, p), c in counts.items() if p != "genuine"]
    by_channel = {}
    for ch in ("external", "peer", "self"):
        g = [c for (c_, p), c in counts.items() if c_ == ch and p == "genuine"]
        b = [c for (c_, p), c in counts.items() if c_ == ch and p != "genuine"]
        by_channel[ch] = {
            "genuine_admitted": sum(x[0] for x in g) / max(1, sum(x[1] for x in g)),
            "poison_admitted": sum(x[0] for x in b) / max(1, sum(x[1] for x in b)),
        }
    return {
        "families": n_families,
        "entries": n,
        "seconds": round(dt, 1),
        "genuine_admitted": sum(x[0] for x in gen) / sum(x[1] for x in gen),
        "poison_admitted": sum(x[0] for x in poi) / sum(x[1] for x in poi),
        "by_channel": by_channel,
        "rows": rows,
    }


def nq_eval_memory(seed: int, policy: str = "curator") -> dict:
    """:func:`nq_eval` through ``Memory``: external writes, ASR@5 from ``Memory.recall``."""
    data = json.loads((NQ / "adv_targeted_nq.json").read_text())
    keys = sorted(data)
    perm = np.random.default_rng(seed).permutation(len(keys))
    halves = {"tune": [keys[i] for i in perm[:50]], "heldout": [keys[i] for i in perm[50:]]}
    out: dict = {}
    for half, ks in halves.items():
        gen = [
            (f"Question: {data[k]['question']}\nAnswer: {data[k]['correct answer']}", False)
            for k in ks
        ]
        poi = [(t, True) for k in ks for t in data[k]["adv_texts"]]
        rng = np.random.default_rng(seed + 1)
        orders = {
            "genuine-first": gen + poi,
            "poison-first": poi + gen,
            "interleaved": [(gen + poi)[i] for i in rng.permutation(len(gen) + len(poi))],
        }
        for name, stream in orders.items():
            ring = KeyRing()
            ring.add(OWNER)
            mem = _memory(ring, policy)
            ga = pa = 0
            for text, is_poison in stream:
                r = mem.write(text, origin="external", meta={"poison": is_poison})
                if r.admitted:
                    pa += int(is_poison)
                    ga += int(not is_poison)
            hits = 0
            for k in ks:
                if len(mem) == 0:
                    break
                top = mem.recall(data[k]["question"], k=5, observe=False)
                hits += int(any(m.meta.get("poison") for m in top.entries))
            out[f"{half}/{name}"] = {
                "genuine_admitted": ga / len(gen),
                "poison_admitted": pa / len(poi),
                "asr_at_5": hits / len(ks),
            }
    return out


def nq_eval(seed: int, passage_prior: bool) -> dict:
    data = json.loads((NQ / "adv_targeted_nq.json").read_text())
    keys = sorted(data)
    perm = np.random.default_rng(seed).permutation(len(keys))
    halves = {"tune": [keys[i] for i in perm[:50]], "heldout": [keys[i] for i in perm[50:]]}
    emb = HashingEmbedder()
    out: dict = {}
    for half, ks in halves.items():
        gen = [
            (
                f"{k}/g",
                f"Question: {data[k]['question']}\nAnswer: {data[k]['correct answer']}",
                False,
                k,
            )
            for k in ks
        ]
        poi = [(f"{k}/p{i}", t, True, k) for k in ks for i, t in enumerate(data[k]["adv_texts"])]
        rng = np.random.default_rng(seed + 1)
        orders = {
            "genuine-first": gen + poi,
            "poison-first": poi + gen,
            "interleaved": [(gen + poi)[i] for i in rng.permutation(len(gen) + len(poi))],
        }
        for name, stream in orders.items():
            adm = _Admitted(emb)
            ga = pa = 0
            for eid, text, is_poison, _k in stream:
                v = emb.embed(text)
                a = assess(
                    text,
                    origin="external",
                    residents=adm.neighbours(v),
                    embed=emb,
                    passage_prior=passage_prior,
                    new_id=eid,
                )
                if a.admit:
                    adm.add(eid, text, v)
                    pa += int(is_poison)
                    ga += int(not is_poison)
            hits = 0
            for k in ks:
                top = adm.neighbours(emb.embed(data[k]["question"]), k=5)
                hits += int(any("/p" in i for i, _ in top))
            out[f"{half}/{name}"] = {
                "genuine_admitted": ga / len(gen),
                "poison_admitted": pa / len(poi),
                "asr_at_5": hits / len(ks),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=str, default=None, help="also write the numbers here")
    ap.add_argument("--via", choices=("gate", "memory"), default="gate")
    args = ap.parse_args()
    if args.via == "memory":
        sql = sql_eval_memory(args.families, args.seed)
        sql["peer_q_after_shrink_mean"] = "see Memory.receive (stats q_adv)"
        res = {
            "sql": sql,
            "nq": nq_eval_memory(args.seed),
            "nq_channel_trust": nq_eval_memory(args.seed, "curator/channel-trust"),
        }
    else:
        res = {
            "sql": sql_eval(args.families, args.seed),
            "nq": nq_eval(args.seed, passage_prior=True),
            "nq_no_passage_prior": nq_eval(args.seed, passage_prior=False),
        }
    s = res["sql"]
    print(
        f"SQL ({s['families']} families, {s['entries']} entries, {s['seconds']} s): "
        f"genuine admitted {s['genuine_admitted']:.3f}, poison admitted {s['poison_admitted']:.3f}"
    )
    for ch, v in s["by_channel"].items():
        print(f"  {ch:9s} genuine {v['genuine_admitted']:.3f}  poison {v['poison_admitted']:.3f}")
    for k, v in s["rows"].items():
        print(f"  {k:22s} {v['admitted']:4d}/{v['n']:4d} = {v['rate']:.3f}")
    print(f"  peer q after reputation shrink (mean): {s['peer_q_after_shrink_mean']}")
    for name in [k for k in res if k.startswith("nq")]:
        print(name)
        for k, v in res[name].items():
            print(
                f"  {k:26s} genuine {v['genuine_admitted']:.3f}  poison "
                f"{v['poison_admitted']:.3f}  ASR@5 {v['asr_at_5']:.3f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
