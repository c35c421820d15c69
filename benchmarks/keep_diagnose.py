"""Why does a policy hold fewer entries than another at the same bytes? (issue 35, item 2)

Runs the bench's SQL stream with the fake executor (no LLM) for each policy and budget, and at the
end of each run reads the memory before it closes: the residents' count, mean bytes, kind
(raw/insight) and family coverage, and the decision log's actions and eviction reasons.

Usage::

    python benchmarks/keep_diagnose.py --policies curator,lru --budgets 50k,100k \\
        --tasks 300 --seeds 0 --vector-dtype int8

Prints one table per (policy, budget): mean over seeds.
"""

from __future__ import annotations

import argparse
import collections
import re
from typing import Any

from memcurator.bench import runner
from memcurator.bench.budget_fronts import parse_budgets
from memcurator.bench.measures import recurring_families, resident_coverage
from memcurator.bench.session import make_executor
from memcurator.bench.stream import StreamConfig, build_stream

_captured: list[dict[str, Any]] = []


class _Capturing(runner.Memory):  # type: ignore[misc, valid-type]
    """The bench's memory, read at close: residents and decisions of the run."""

    def close(self) -> None:
        ents = self.entries()
        decs = self.decisions()
        _captured.append({"entries": ents, "decisions": decs})
        super().close()


def _reason_key(reason: str) -> str:
    """A decision reason without its numbers and ids (so reasons group)."""
    r = re.sub(r"[0-9a-f]{8,}", "<id>", reason)
    return re.sub(r"[-+]?\d+(\.\d+)?", "#", r)[:90]


_DISTILL = re.compile(r"(\d+) -> (\d+) bytes")


def _distillations(decisions: list[Any], entries: list[Any]) -> dict[str, float]:
    """Bytes before/after each distillation, how many distilled entries were evicted later,
    and the refusals (notices) of a run's decision log."""
    sizes = [tuple(int(x) for x in mt.groups()) for d in decisions if d.action == "distill"
             for mt in [_DISTILL.search(d.reason)] if mt]  # fmt: skip
    distilled = {d.entry_id for d in decisions if d.action == "distill"}
    evicted = {d.entry_id for d in decisions if d.action == "evict"}
    n = len(sizes)
    return {
        "n_distill": float(n),
        "raw_b": sum(a for a, _ in sizes) / n if n else float("nan"),
        "ins_b": sum(b for _, b in sizes) / n if n else float("nan"),
        "dist_evicted": float(len(distilled & evicted)),
        "refused": float(
            sum(d.action == "notice" and "distillation refused" in d.reason for d in decisions)
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="curator,lru")
    ap.add_argument("--budgets", default="100k")
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--vector-dtype", default="int8")
    ap.add_argument("--reasons", type=int, default=6, help="eviction reasons shown per run")
    ap.add_argument("--policy-file", default=None, help="TOML/JSON of extra policy specs")
    a = ap.parse_args()
    if a.policy_file:
        from memcurator.policy import register
        from memcurator.policy.presets import load_policy_file

        for name, spec in load_policy_file(a.policy_file).items():
            register(name, spec)
    runner.Memory = _Capturing  # type: ignore[misc]
    fams = runner.load_families()
    ex = make_executor("fake")
    seeds = [int(s) for s in a.seeds.split(",")]
    for pol in a.policies.split(","):
        for bud in a.budgets.split(","):
            rows = []
            reasons: collections.Counter[str] = collections.Counter()
            actions: collections.Counter[str] = collections.Counter()
            for seed in seeds:
                scfg = StreamConfig(n_tasks=a.tasks, seed=seed)
                stream = build_stream(scfg, fams)
                cfg = runner.BenchConfig(
                    policies=(pol,),
                    seeds=(seed,),
                    stream=scfg,
                    max_bytes=parse_budgets(bud)[0],
                    vector_dtype=a.vector_dtype,
                )
                _captured.clear()
                run = runner.run_policy(pol, stream, ex, cfg, seed)
                got = _captured[-1]
                ents = [m for m in got["entries"] if not m.meta.get("poison")]
                rec = recurring_families([t.family for t in stream.tasks])
                n = len(ents)
                rows.append(
                    {
                        "acc": sum(r.local_ok for r in run.records) / len(run.records),
                        "n": n,
                        "mean_b": sum(m.bytes for m in ents) / max(n, 1),
                        "used": sum(m.bytes for m in got["entries"]),
                        "insight": sum(m.kind == "insight" for m in ents) / max(n, 1),
                        "cover": resident_coverage([m.meta.get("family") for m in ents], rec),
                        "fams": len({m.meta.get("family") for m in ents}),
                        "rec": len(rec),
                    }
                )
                dist = _distillations(got["decisions"], got["entries"])
                rows[-1].update(dist)
                for d in got["decisions"]:
                    actions[d.action] += 1
                    if d.action in ("evict", "reject", "distill"):
                        reasons[f"{d.action}: {_reason_key(d.reason)}"] += 1
            k = len(rows)
            mean = {key: sum(r[key] for r in rows) / k for key in rows[0]}
            print(
                f"{pol}@{bud}: acc {mean['acc']:.3f}  residents {mean['n']:.1f}  "
                f"mean B {mean['mean_b']:.0f}  used {mean['used'] / 1000:.1f} kB  "
                f"insight share {mean['insight']:.2f}  coverage {mean['cover']:.3f} "
                f"({mean['fams']:.1f} families resident, {mean['rec']:.0f} recurring)"
            )
            print(
                f"   distillations {mean['n_distill']:.1f}: raw {mean['raw_b']:.0f} -> insight "
                f"{mean['ins_b']:.0f} B; evicted later {mean['dist_evicted']:.1f}; "
                f"refused {mean['refused']:.1f}"
            )
            print("   actions:", dict(actions))
            for r, c in reasons.most_common(a.reasons):
                print(f"   {c / k:7.1f}  {r}")


if __name__ == "__main__":
    main()
