"""What sharing could give, what it costs at least, and demand-driven sharing (issue 33).

For one peer group (workload, seed) under the scripted responder this runs, in one process:
curator isolated, curator pooled, curator with CURATOR's push Share (``exchange="push"``),
curator with demand-driven pull (``exchange="pull"``) and lru broadcasting every entry, and
writes their per-task records and a trace to ``OUT/<workload>-s<seed>.json``:

- **attribution in pooled**: a pooled success whose executed SQL was first written by another
  agent (the action of a peer's earlier task: its local SQL when solved, else the expert's)
  needed sharing; one written first by the agent itself did not.
- **the oracle**: the bytes of exactly the entries that made a receiver succeed in pooled,
  sent once per (receiver, entry) with their signed outcome claim, as the bench frames them
  (:func:`memcurator.bench.peers.encode`), ÷ broadcast's bytes on the wire (lru, the same
  group). No scheme that sends whole entries can capture pooled's peer-sourced successes in
  fewer bytes (it must deliver each of those entries before its use).
- **the push trace**: before each task of the push run, whether the agent's own memory and
  each peer's covered the exact task (an injectable entry distilled from it:
  :meth:`memcurator.Memory.covers`), so each task pooled solves and push fails is classed as
  "a peer held it then" or not.

``report DIR`` merges the JSON files into markdown tables (captured share with paired CIs via
:func:`memcurator.bench.peer_report.pooled_gain`, bytes vs broadcast, the oracle, the
cold-start table).

Usage::

    python benchmarks/peer_demand.py run --workload rotating --seed 0 --tasks 60 --out DIR
    python benchmarks/peer_demand.py report DIR

``--executor gguf --threads 1`` runs the bundled model instead of the scripted responder
(``benchmarks/peer_real_llm.sh``); the oracle and the coverage trace then still count exact
tasks, while a real model may also use a similar task's entry.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np


def _written(records: list[dict[str, Any]], plan: Any) -> dict[tuple[int, int], str]:
    """(step, agent index) -> the action the agent's entry of that task holds (its SQL when it
    solved the task, else the expert's reference SQL)."""
    idx = {n: i for i, n in enumerate(plan.names)}
    out = {}
    for r in records:
        i, t = idx[r["agent"]], int(r["step"])
        spec = plan.streams[i].tasks[t].payload["spec"]
        out[(t, i)] = (r["sql"] if r["local_ok"] else spec.sql).strip()
    return out


def _frame_bytes(plan: Any, cfg: Any, sender: int, receiver: int, t: int, action: str) -> int:
    """Bytes of the bench's frame for the entry ``sender`` wrote at step ``t`` sent to
    ``receiver``: signed, with its signed outcome claim (as the push Share frames it)."""
    from memcurator.bench.peers import _rings, encode
    from memcurator.distill import render_insight
    from memcurator.policy.share import SharedEntry
    from memcurator.trust.auth import Claim
    from memcurator.trust.outcome import OutcomeClaim, sign_outcome, state_hash, text_sha

    s, r = plan.names[sender], plan.names[receiver]
    task = plan.streams[sender].tasks[t]
    text = render_insight(task.instruction.strip(), action)
    ring = _rings(plan.names, cfg.seed)[s]
    sig = ring.sign(Claim(r, "peer", s, "insight", text), principal=s)
    claim = OutcomeClaim(task.id, action, "pass", state_hash([], ""), text_sha(text))
    so = sign_outcome(ring, claim, to=r, sender=s)
    e = SharedEntry(text, "insight", len(text), 0.25, 1.0, 1e-4, "e" * 32, signature=sig,
                    outcome=so)  # fmt: skip
    return 4 + len(encode(e, s))


def oracle(pooled: list[dict[str, Any]], plan: Any, cfg: Any) -> dict[str, Any]:
    """Attribution of pooled's successes and the oracle's bytes (see the module docstring)."""
    written = _written(pooled, plan)
    first: dict[str, tuple[int, int]] = {}
    for key in sorted(written):  # (step, agent): the lockstep order of the run
        first.setdefault(written[key], key)
    idx = {n: i for i, n in enumerate(plan.names)}
    counts = {"own": 0, "peer": 0, "none": 0}
    sends: dict[tuple[int, str], int] = {}
    for r in pooled:
        if not r["local_ok"]:
            continue
        i, t = idx[r["agent"]], int(r["step"])
        sql = r["sql"].strip()
        # the agent's own earlier write of this action, else the first writer before it
        own = any(written.get((u, i)) == sql for u in range(t))
        src = first.get(sql)
        if own:
            counts["own"] += 1
        elif src is not None and src < (t, i):
            counts["peer"] += 1
            if (i, sql) not in sends:
                sends[(i, sql)] = _frame_bytes(plan, cfg, src[1], i, src[0], sql)
        else:
            counts["none"] += 1
    return {**counts, "sends": len(sends), "bytes": int(sum(sends.values()))}


def attacker_bytes(d: dict[str, Any]) -> float:
    """Bytes per agent and round of the compromised peer's pushed traffic (its attack entries
    and false records with forged outcomes, framed as the bench's outbox frames them): the
    same in every arm with outside traffic, and no part of any sharing scheme's cost."""
    from memcurator.bench.peers import (
        PeerConfig,
        _rings,
        attack_frame,
        draw_plan,
        encode,
        forged_frame,
    )
    from memcurator.bench.runner import load_families

    wl = d["workload"]
    cfg = PeerConfig(workload=wl, n_tasks=d["tasks"], seed=d["seed"], n_families=30,
                     join_after=d.get("join_after"))  # fmt: skip
    plan = draw_plan(load_families(), cfg)
    s = plan.bad_peer
    ring = _rings(plan.names, cfg.seed)[s]
    frames = [
        attack_frame(ring, s, r, t)
        for r in plan.names[:-1]
        for ch, _, _, t in plan.attacks[r]
        if ch == "peer" and t is not None
    ] + [
        forged_frame(ring, s, r, fam, t, action)
        for r in plan.names[:-1]
        for fam, t, action, _ in plan.false.get(r, [])
    ]
    total = sum(4 + len(encode(e, s)) for e in frames)
    return total / (cfg.n_tasks // cfg.share_every) / cfg.peers


def _trace_push(cfg: Any, fams: Any, ex: Any) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """The push run with, before each task, who covered it (own memory, peers)."""
    from memcurator.bench import peers as P

    agents: list[Any] = []
    cover: dict[str, Any] = {}
    init, step = P._PeerAgent.__init__, P._PeerAgent.step

    def init2(self: Any, *a: Any, **kw: Any) -> None:
        init(self, *a, **kw)
        agents.append(self)

    def step2(self: Any, t: int) -> None:
        if self.arm == "share" and t >= self.start:
            ins = self.plan.streams[self.i].tasks[t].instruction
            peers = [
                b.name
                for b in agents
                if b is not self and b.arm == "share" and t >= b.start and b.mem.covers(ins)
            ]
            cover[f"{self.name}:{t}"] = {"own": self.mem.covers(ins), "peers": peers}
        step(self, t)

    P._PeerAgent.__init__, P._PeerAgent.step = init2, step2  # type: ignore[method-assign]
    try:
        acc, det = P.run_group("curator", fams, ex, cfg)
    finally:
        P._PeerAgent.__init__, P._PeerAgent.step = init, step  # type: ignore[method-assign]
    return acc, det, cover


def run(args: argparse.Namespace) -> None:
    from memcurator.bench.agent import copy_first_action
    from memcurator.bench.peers import PeerConfig, draw_plan, run_group
    from memcurator.bench.runner import load_families
    from memcurator.llm.fake import ScriptedExecutor

    fams = load_families()
    if args.executor == "fake":
        ex = ScriptedExecutor(copy_first_action)
    else:  # the bundled model (or an endpoint), with the completion cache
        from memcurator.bench.session import make_executor

        ex = make_executor(args.executor, threads=args.threads, env="sql")
    cfg = PeerConfig(
        workload=args.workload,
        n_tasks=args.tasks,
        seed=args.seed,
        uplink=args.uplink,
        n_families=30,
        join_after=args.join_after,
        match_cos=args.match_cos,
        shape=args.shape,
        compact=args.compact,
        observe_demand=args.observe_demand,
    )
    plan = draw_plan(fams, cfg)
    out: dict[str, Any] = {
        "workload": args.workload,
        "seed": args.seed,
        "tasks": args.tasks,
        "executor": args.executor,
        "join_after": args.join_after,
        "shape": args.shape,
        "compact": args.compact,
        "observe_demand": args.observe_demand,
    }
    arms: dict[str, Any] = {}
    t0 = time.time()
    dest = Path(args.out)
    dest.mkdir(parents=True, exist_ok=True)
    arm_fns = {
        "isolated": lambda: run_group("curator", fams, ex, cfg, outside=False),
        "pooled": lambda: run_group("curator", fams, ex, cfg, pooled=True),
        "push": lambda: _trace_push(cfg, fams, ex),
        "pull": lambda: run_group("curator", fams, ex, replace(cfg, exchange="pull")),
        "broadcast": lambda: run_group("lru", fams, ex, cfg),
    }
    for name in args.arms.split(","):  # in the order given; the file is rewritten after each
        fn = arm_fns[name]
        res = fn()
        acc, det = res[0], res[1]
        if name == "push":
            out["cover"] = res[2]
        arms[name] = {
            "accuracy": acc,
            "bytes_per_round": det["uplink_bytes_per_round"],
            "rounds": det["rounds"],
            "pull": det.get("pull", {}),
            "pull_reasons": det.get("pull_reasons", {}),
            "channels": {
                ch: {k: v for k, v in c.items() if k != "payloads"}
                for ch, c in det.get("channels", {}).items()
            },
            "claims": {k: v for k, v in det.get("claims", {}).items() if k != "caught_after"},
            "records": [
                {
                    k: r[k]
                    for k in (
                        "agent",
                        "step",
                        "local_ok",
                        "sql",
                        "joined_at",
                        "pulled",
                        "pull_state",
                        "pull_shown",
                    )
                    if k in r
                }  # fmt: skip
                for r in det["records"]
            ],
        }
        print(f"{args.workload} s{args.seed} {name}: acc {acc:.3f}, "
              f"{det['uplink_bytes_per_round']:.0f} B/round, {time.time() - t0:.0f} s",
              flush=True)  # fmt: skip
        if name == "pooled":
            out["oracle"] = oracle(arms["pooled"]["records"], plan, cfg)
        out["arms"] = arms
        (dest / f"{args.workload}-s{args.seed}.json").write_text(json.dumps(out))


def _as_records(d: dict[str, Any], label: str, arm_name: str, src: str) -> list[dict[str, Any]]:
    return [
        {
            "policy": label,
            "uplink": 0,
            "seed": d["seed"],
            "agent": r["agent"],
            "step": r["step"],
            "arm": arm_name,
            "outside": arm_name == "share",
            "local_ok": bool(r["local_ok"]),
            "joined_at": r.get("joined_at", 0),
        }
        for r in d["arms"][src]["records"]
    ]


def report(args: argparse.Namespace) -> None:
    from memcurator.bench.peer_report import cold_start, pooled_gain

    files = sorted(Path(args.dir).glob("*.json"))
    by_w: dict[str, list[dict[str, Any]]] = {}
    before: dict[tuple[str, int], dict[str, Any]] = {}
    for f in files:
        d = json.loads(f.read_text())
        if args.reference:  # arms this run left out (the same streams: the same code paths)
            ref = Path(args.reference) / f.name
            if ref.exists():
                r = json.loads(ref.read_text())
                d["arms"] = {**{k: v for k, v in r["arms"].items() if k != "pull"}, **d["arms"]}
                d.setdefault("oracle", r.get("oracle"))
                if "pull" in r["arms"]:
                    before[(d["workload"], d["seed"])] = r
        by_w.setdefault(d["workload"], []).append(d)
    print("| workload | seeds | arm | isolated | share | pooled | pooled − isolated | "
          "captured [95% CI] | B/round | ÷ broadcast | attacker B/round | "
          "(B − attacker) ÷ (broadcast − attacker) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    orc_rows, cold_rows, diag_rows, pull_rows = [], [], [], []
    reasons: dict[tuple[str, str], int] = {}
    asr: dict[tuple[str, str], list[float]] = {}
    for w, ds in sorted(by_w.items()):
        bcs = [d["arms"]["broadcast"]["bytes_per_round"] for d in ds if "broadcast" in d["arms"]]
        known = dict(kv.split("=") for kv in args.broadcast.split(",") if kv)
        bc = float(np.mean(bcs)) if bcs else float(known.get(w, "nan"))
        for label in ("push", "pull", "broadcast"):
            have = [d for d in ds if {"isolated", "pooled", label} <= set(d["arms"])]
            if not have:
                continue
            seeds = sorted(d["seed"] for d in have)
            recs, runs = [], []
            for d in have:
                recs += _as_records(d, label, "share", label)
                recs += _as_records(d, label, "isolated", "isolated")
                recs += _as_records(d, label, "pooled", "pooled")
                runs.append(
                    {
                        "policy": label,
                        "uplink": 0,
                        "seed": d["seed"],
                        "uplink_bytes_per_round": d["arms"][label]["bytes_per_round"],
                    }
                )
            g = pooled_gain(runs, recs, n_boot=2000)[0]
            atk = float(np.mean([attacker_bytes(d) for d in have]))
            honest = (g["bytes"] - atk) / (bc - atk)
            print(
                f"| {w} | {seeds} | {label} | {g['isolated']:.3f} | {g['share']:.3f} | "
                f"{g['pooled']:.3f} | {g['gain']:+.3f} | {g['captured']:.2f} "
                f"[{g['lo']:.2f}, {g['hi']:.2f}] | {g['bytes']:.0f} | {g['bytes'] / bc:.3f} "
                f"| {atk:.0f} | {honest:.3f} |"
            )
            for c in cold_start(recs, n_boot=2000):
                cold_rows.append(
                    f"| {label} | {seeds} | {c['isolated']:.3f} | {c['share']:.3f}"
                    f" | {c['pooled']:.3f} | {c['ratio']:.2f} "
                    f"[{c['lo']:.2f}, {c['hi']:.2f}] |"
                )
        for d in ds:
            a = d["arms"]
            if "oracle" in d:
                o = d["oracle"]
                rounds = d["tasks"] // 10  # share_every
                b = a["broadcast"]["bytes_per_round"] if "broadcast" in a else bc
                total = b * rounds * 4
                orc_rows.append(
                    f"| {w} | {d['seed']} | {o['own']} | {o['peer']} | {o['none']} | "
                    f"{o['sends']} | {o['bytes']} | {total:.0f}"
                    f"{'' if 'broadcast' in a else ' (seed 0 rate)'} | {o['bytes'] / total:.3f} |"
                )
            if "pull" in a:
                pull_rows.append(f"| {w} | {d['seed']} | " + " | ".join(
                    str(a["pull"]["pull"].get(k, "–")) for k in PULL_COLS) + " |")  # fmt: skip
                for why, n in a["pull"].get("pull_reasons", {}).items():
                    reasons[(w, why)] = reasons.get((w, why), 0) + n
                for ch, c in a["pull"].get("channels", {}).items():
                    tot = asr.setdefault((w, ch), [0.0, 0, 0.0, 0])
                    tot[0] += c["asr"] * c["asr_n"] if c["asr_n"] else 0.0
                    tot[1] += c["asr_n"]
                    tot[2] += c["poison_admitted"] * c["poison_n"] if c["poison_n"] else 0.0
                    tot[3] += c["poison_n"]
            if "push" in a and "cover" in d and "oracle" in d:
                diag_rows.append(_diag(w, d))
    print("\nOracle (pooled's successes by who first wrote the action; bytes of exactly the "
          "entries behind the peer-sourced ones, once per receiver):\n")  # fmt: skip
    print("| workload | seed | own | from a peer | neither | sends | oracle B | broadcast B "
          "(total) | oracle ÷ broadcast |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    print("\n".join(orc_rows))
    print("\nTasks pooled solved and push failed, by what the push run's memories held "
          "before the task:\n")  # fmt: skip
    print("| workload | seed | pooled ok, push failed | own memory covered it | a peer covered "
          "it (not own) | nobody | bytes to send those (one frame each) |\n"
          "|---|---|---|---|---|---|---|")  # fmt: skip
    print("\n".join(diag_rows))
    print("\nPull counts (summed over receivers; memcurator.bench.peers.PULL_FIELDS):\n")
    print("| workload | seed | " + " | ".join(PULL_COLS) + " |\n|---|---|"
          + "---|" * len(PULL_COLS))  # fmt: skip
    print("\n".join(pull_rows))
    if reasons:
        print("\nWhy fetched entries were not released (summed over seeds):\n")
        print("| workload | reason | n |\n|---|---|---|")
        for (w, why), n in sorted(reasons.items()):
            print(f"| {w} | {why} | {n} |")
    if asr:
        print("\nThe pull arm's channels under attack (summed over seeds): behaviour ASR and "
              "poison admitted:\n")  # fmt: skip
        print("| workload | channel | ASR | target tasks | poison admitted | poison offered |\n"
              "|---|---|---|---|---|---|")  # fmt: skip
        for (w, ch), (h, n, pa, pn) in sorted(asr.items()):
            print(f"| {w} | {ch} | {h / n if n else float('nan'):.3f} | {n} | "
                  f"{pa / pn if pn else float('nan'):.3f} | {pn} |")  # fmt: skip
    if before:
        _before_after(by_w, before)
    if cold_rows:
        print("\nCold start, the newcomer's first 50 tasks (share ÷ pooled, 95% CI):\n")
        print("| arm | seeds | isolated | share | pooled | share ÷ pooled [95% CI] |\n"
              "|---|---|---|---|---|---|")  # fmt: skip
        print("\n".join(cold_rows))


#: the pull counts the report shows (runs made before a count existed show "–")
PULL_COLS = ("demands", "offers", "fetched", "fetched_exact", "lies", "admitted",
             "over_budget", "unasked", "released", "waiting", "held", "probation", "shown",
             "shown_ok")  # fmt: skip


def _before_after(by_w: dict[str, list[dict[str, Any]]],
                  before: dict[tuple[str, int], dict[str, Any]]) -> None:  # fmt: skip
    """Per workload (its seeds together): the pull arm before (the reference run's) and after,
    paired task by task on the same streams: the captured share of each and their difference,
    the accuracy difference, with 95% bootstrap CIs (tasks resampled within seed and agent,
    :func:`memcurator.bench.compare.resample_within`)."""
    from memcurator.bench.compare import resample_within

    print("\nBefore → after, the pull arm paired task by task (95% CIs):\n")
    print("| workload | seeds | pooled − isolated | captured before | captured after | "
          "after − before (captured) | after − before (accuracy) | B/round before → after |\n"
          "|---|---|---|---|---|---|---|---|")  # fmt: skip
    rng = np.random.default_rng(0)
    for w, ds in sorted(by_w.items()):
        have = [d for d in ds if (w, d["seed"]) in before and "pull" in d["arms"]]
        if not have:
            continue
        keys, cols = [], {k: [] for k in ("b", "a", "i", "p")}  # type: dict[str, list[float]]
        for d in have:
            r = before[(w, d["seed"])]["arms"]
            src = {"b": r["pull"], "a": d["arms"]["pull"], "i": d["arms"]["isolated"],
                   "p": d["arms"]["pooled"]}  # fmt: skip
            ok = {k: {(x["agent"], x["step"]): float(x["local_ok"]) for x in v["records"]}
                  for k, v in src.items()}  # fmt: skip
            common = sorted(set.intersection(*(set(v) for v in ok.values())))
            keys += [f"{d['seed']}/{ag}" for ag, _ in common]
            for k in cols:
                cols[k] += [ok[k][c] for c in common]
        b, a, i, p = (np.array(cols[k]) for k in ("b", "a", "i", "p"))

        def cap(x: np.ndarray, i: np.ndarray, p: np.ndarray) -> float:
            g = p.mean() - i.mean()
            return float((x.mean() - i.mean()) / g) if g > 0 else float("nan")

        boots = np.array([(cap(a[j], i[j], p[j]) - cap(b[j], i[j], p[j]), a[j].mean() - b[j].mean())
                          for j in resample_within(keys, 2000, rng)])  # fmt: skip
        dc = boots[np.isfinite(boots[:, 0]), 0]
        bb = np.mean([before[(w, d["seed"])]["arms"]["pull"]["bytes_per_round"] for d in have])
        ab = np.mean([d["arms"]["pull"]["bytes_per_round"] for d in have])
        print(
            f"| {w} | {sorted(d['seed'] for d in have)} | {p.mean() - i.mean():+.3f} | "
            f"{cap(b, i, p):.2f} | {cap(a, i, p):.2f} | {cap(a, i, p) - cap(b, i, p):+.2f} "
            f"[{np.percentile(dc, 2.5):+.2f}, {np.percentile(dc, 97.5):+.2f}] | "
            f"{a.mean() - b.mean():+.3f} [{np.percentile(boots[:, 1], 2.5):+.3f}, "
            f"{np.percentile(boots[:, 1], 97.5):+.3f}] | {bb:.0f} → {ab:.0f} |"
        )


def _diag(w: str, d: dict[str, Any]) -> str:
    pooled = {(r["agent"], r["step"]): r["local_ok"] for r in d["arms"]["pooled"]["records"]}
    push = {(r["agent"], r["step"]): r["local_ok"] for r in d["arms"]["push"]["records"]}
    n = own = peer = none = 0
    for k, ok in pooled.items():
        if not ok or push.get(k, True):
            continue
        n += 1
        c = d["cover"].get(f"{k[0]}:{k[1]}", {"own": False, "peers": []})
        if c["own"]:
            own += 1
        elif c["peers"]:
            peer += 1
        else:
            none += 1
    frame = d["oracle"]["bytes"] / max(d["oracle"]["sends"], 1)
    return f"| {w} | {d['seed']} | {n} | {own} | {peer} | {none} | ≈ {peer * frame:.0f} |"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--workload", default="control")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--tasks", type=int, default=60)
    r.add_argument("--uplink", type=int, default=5000)
    r.add_argument("--join-after", type=int, default=None)
    r.add_argument("--match-cos", type=float, default=None)
    r.add_argument(
        "--shape",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pull: demands carry the task's shape key (siblings may answer)",
    )
    r.add_argument(
        "--compact",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pull: fetched entries cross as compact frames",
    )
    r.add_argument(
        "--observe-demand",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pull: observe the task an entry was fetched for before it arrives",
    )
    r.add_argument("--arms", default="isolated,pooled,pull,broadcast,push")
    r.add_argument("--executor", default="fake", help="fake (scripted), gguf, openai")
    r.add_argument("--threads", type=int, default=None, help="gguf: CPU threads")
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("dir")
    p.add_argument(
        "--broadcast",
        default="",
        help="workload=B/round of a broadcast run made elsewhere, for workloads without one",
    )
    p.add_argument(
        "--reference",
        default="",
        help="a directory of runs of the same (workload, seed) whose arms fill those a run "
        "left out; its pull arm is the 'before' of a before/after table",
    )
    args = ap.parse_args(argv)
    run(args) if args.cmd == "run" else report(args)


if __name__ == "__main__":
    main(sys.argv[1:])
