"""MemPilot's preference sweep: presets per λ and the quality-cost / quality-latency fronts.

``memcurator bench --preferences 0:0,0.5:0,1:0,0:1`` registers one ``mempilot@C=..,L=..`` preset
per pair (λ_C, λ_L) (λ_Q = 1), adds the fixed pipelines the paper's trade-off baselines stand for
(always retrieve k=1, always curate with the local model, always escalate to the priced expert),
and the results folder gets ``fronts.png``: task accuracy against cost per task and against the
latency proxy per task, the Pareto front of the preference sweep drawn as a line.

References
----------
MemPilot, Sec. 4.4 and Figure 2 (performance-cost and performance-latency frontiers).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput

FIXED_PIPELINES: tuple[str, ...] = (
    "pipeline/retrieve-k1",
    "pipeline/curate-local",
    "pipeline/escalate",
)


def parse_preferences(text: str) -> list[tuple[float, float]]:
    """``"0:0,0.5:0,1:1"`` → ``[(0.0, 0.0), (0.5, 0.0), (1.0, 1.0)]`` as (λ_C, λ_L) pairs.

    Raises
    ------
    InvalidInput
        A pair that is not ``C:L`` with two finite numbers >= 0, or no pair at all.

    Examples
    --------
    >>> parse_preferences("0:0, 1:0.5")
    [(0.0, 0.0), (1.0, 0.5)]
    """
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            c, lt = (float(v) for v in part.split(":"))
        except ValueError:
            raise InvalidInput(
                f"a preference must be 'lambda_C:lambda_L' (e.g. 0.5:0), got {part!r}"
            ) from None
        if not (math.isfinite(c) and math.isfinite(lt)) or c < 0 or lt < 0:
            raise InvalidInput(f"preferences must be finite numbers >= 0, got {part!r}")
        out.append((c, lt))
    if not out:
        raise InvalidInput("--preferences needs at least one 'lambda_C:lambda_L' pair")
    return out


def preference_name(lam_c: float, lam_l: float) -> str:
    """The preset name of one preference, e.g. ``mempilot@C=0.5,L=0``."""
    return f"mempilot@C={lam_c:g},L={lam_l:g}"


def register_preferences(prefs: list[tuple[float, float]]) -> list[str]:
    """Register one MemPilot preset per (λ_C, λ_L); returns their names, in order."""
    from memcurator.policy import register

    names = []
    for c, lt in prefs:
        name = preference_name(c, lt)
        register(
            name,
            {
                "base": "mempilot",
                "description": f"MemPilot at preference (1, {c:g}, {lt:g})",
                "curate": {"name": "mempilot", "lam_cost": c, "lam_latency": lt},
            },
        )
        names.append(name)
    return names


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not dominated (lower x and higher y are better), sorted by x.

    Examples
    --------
    >>> pareto([(1, 0.5), (2, 0.4), (3, 0.9), (0.5, 0.1)])
    [(0.5, 0.1), (1, 0.5), (3, 0.9)]
    """
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return front


def has_sweep(summary: list[dict[str, Any]]) -> bool:
    """Whether a summary holds MemPilot presets or fixed pipelines (fronts worth drawing)."""
    return any(str(r["policy"]).startswith(("mempilot", "pipeline/")) for r in summary)


def _seed_se(row: dict[str, Any]) -> float:
    """Standard error of a summary row's accuracy over its seeds (0 for one seed).

    Examples
    --------
    >>> _seed_se({"accuracy_sd": 0.04, "seeds": 4})
    0.02
    >>> _seed_se({"accuracy_sd": 0.04, "seeds": 1})
    0.0
    """
    n = int(row.get("seeds", 1) or 1)
    sd = row.get("accuracy_sd")
    if n < 2 or not isinstance(sd, int | float) or not math.isfinite(sd):
        return 0.0
    return float(sd) / math.sqrt(n)


def plot_fronts(path: Path, summary: list[dict[str, Any]]) -> Path:
    """Two panels: accuracy vs cost per task (USD) and vs latency proxy per task (s).

    MemPilot presets are filled circles joined along their Pareto front; fixed pipelines are
    squares; every other policy is a faint cross, for context. With more than one seed, each
    point carries ± one standard error of its accuracy over the seeds
    (``accuracy_sd / sqrt(seeds)``).

    Raises
    ------
    InvalidInput
        No row has the cost and latency measures.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memcurator.bench.plotting import finish_png

    rows = [
        r
        for r in summary
        if all(isinstance(r.get(k), int | float) and math.isfinite(r[k])
               for k in ("accuracy", "cost_per_task", "latency_proxy_s"))
    ]  # fmt: skip
    if not rows:
        raise InvalidInput("no policy has accuracy, cost per task and latency proxy to plot")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, key, label in (
        (axes[0], "cost_per_task", "cost per task (USD; escalation + curation, Eq. 14)"),
        (axes[1], "latency_proxy_s", "latency proxy per task (s; Eq. 15-19)"),
    ):
        sweep = [r for r in rows if str(r["policy"]).startswith("mempilot")]
        colours = plt.get_cmap("winter")([i / max(1, len(sweep) - 1) for i in range(len(sweep))])
        for r in rows:
            pol = str(r["policy"])
            x, y = float(r[key]), float(r["accuracy"])
            se = _seed_se(r)
            if se > 0:
                ax.errorbar(x, y, yerr=se, fmt="none", ecolor="grey", alpha=0.5, capsize=2)
            if pol.startswith("mempilot"):
                # one colour per preference, named in the legend (labels would overlap)
                c = colours[[str(q["policy"]) for q in sweep].index(pol)]
                ax.plot(x, y, "o", color=c, ms=7, label=pol if ax is axes[0] else None)
            elif pol.startswith("pipeline/"):
                ax.plot(x, y, "s", color="tab:orange", ms=8)
                ax.annotate(pol.removeprefix("pipeline/"), (x, y), fontsize=7,
                            xytext=(4, -10), textcoords="offset points")  # fmt: skip
            else:
                ax.plot(x, y, "x", color="grey", alpha=0.6)
                ax.annotate(pol, (x, y), fontsize=6, color="grey", xytext=(3, 3),
                            textcoords="offset points")  # fmt: skip
        if sweep:
            fr = pareto([(float(r[key]), float(r["accuracy"])) for r in sweep])
            ax.plot([p[0] for p in fr], [p[1] for p in fr], "-", color="tab:blue", alpha=0.6,
                    label="MemPilot Pareto front" if ax is axes[0] else None)  # fmt: skip
        xs = [float(r[key]) for r in rows if float(r[key]) > 0]
        if xs and max(xs) / min(xs) > 5:
            # the priced expert is far right; keep the cheap ones apart. A free policy (x = 0)
            # has no place on a log axis: symlog, linear below the cheapest priced one
            if any(float(r[key]) <= 0 for r in rows):
                ax.set_xscale("symlog", linthresh=min(xs))
                label += ", log scale above " + f"{min(xs):.2g}"
            else:
                ax.set_xscale("log")
                label += ", log scale"
        ax.set_xlabel(label)
        ax.grid(alpha=0.3, which="both")
    axes[0].plot([], [], "s", color="tab:orange", label="fixed pipelines")
    axes[0].plot([], [], "x", color="grey", label="other policies")
    several = any(_seed_se(r) > 0 for r in rows)
    axes[0].set_ylabel(
        "local task accuracy" + (" (mean over seeds, bars ± 1 s.e.)" if several else "")
    )
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle("Quality-cost and quality-latency fronts (MemPilot Fig. 2 on this testbed)")
    return finish_png(fig, path)


__all__ = [
    "FIXED_PIPELINES",
    "has_sweep",
    "pareto",
    "parse_preferences",
    "plot_fronts",
    "preference_name",
    "register_preferences",
]
