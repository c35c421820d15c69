"""Budget fronts: every bounded policy at several budgets, accuracy against peak resident KB.

A *front* is one line per policy through its (peak KB, accuracy) points, one point per budget.
``memcurator bench --max-bytes 25k,50k,100k`` runs every bounded policy at each budget (its runs
are labelled ``policy@25k``), and the unbounded references (``keep-all``, ``full-oracle``) once.
The swept setting is a parameter (:attr:`BenchConfig.sweep_setting`), and what a front plots is a
:class:`FrontAxes` (:data:`BUDGET_AXES` here; :data:`memcurator.bench.peer_report.UPLINK_AXES`
puts uplink bytes per round on x for the peer group's uplink budgets L, CURATOR Fig. 6b, with the
broadcasting policies as references).

Definitions used in the table and the plot:

- **95% CI**: percentile bootstrap over tasks resampled within each seed (the seeds × tasks the
  point rests on), from ``records.csv``; without records, mean ± sd over seeds.
- **knee**: the smallest budget at which the policy's mean task accuracy reaches
  :data:`KNEE_SHARE` (97%) of its own best over the swept budgets. It says where buying more
  bytes stops paying for that policy.
- **97% of oracle**: the smallest budget at which the policy reaches 97% of ``full-oracle``'s
  accuracy (CURATOR's headline criterion), with its peak KB as a share of keep-all's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from memcurator.errors import InvalidInput


class SweepConfig(Protocol):
    """What a sweep reads of a bench config (:class:`memcurator.bench.runner.BenchConfig`, a
    dataclass); typed here as a protocol so that this module does not import the runner, which
    imports it."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def policies(self) -> Sequence[str]: ...

    @property
    def sweep_setting(self) -> str: ...

    @property
    def sweep_values(self) -> Sequence[int]: ...


C = TypeVar("C", bound=SweepConfig)

#: a policy's knee is its smallest budget reaching this share of its best accuracy
KNEE_SHARE = 0.97
#: policies drawn as references (unbounded, run once)
REFERENCES = ("keep-all", "full-oracle")


@dataclass(frozen=True)
class FrontAxes:
    """What a front shows: the x measure, the words for it, and the reference it is divided by.

    Parameters
    ----------
    x : str
        Per-run measure on the x axis (a key of the run dicts), e.g. ``"peak_kb"``.
    x_label : str
        Its column header and axis label.
    x_format : str
        Format spec of an x value in tables (``".1f"``).
    setting : str
        Header of the swept value's column (``"budget"``, ``"L"``).
    reference : str
        How a reference run (one without a swept value) is named in tables and legends.
    x_ref : str
        Policy whose reference x the others' x is divided by (``x_of_ref``); '' for none.
    oracle : bool
        Show the ÷ full-oracle column and the 97%-of-oracle lines.
    title : str
        Title of the table and the plot.
    """

    x: str = "peak_kb"
    x_label: str = "peak KB"
    x_format: str = ".1f"
    setting: str = "budget"
    reference: str = "unbounded"
    x_ref: str = "keep-all"
    oracle: bool = True
    title: str = "budget fronts — accuracy against peak KB"


#: the resident-budget front of ``bench --max-bytes 25k,50k,...``
BUDGET_AXES = FrontAxes()

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_budgets(text: str | int) -> list[int]:
    """Budgets from ``"25k,50k,100000"`` (k/K = 1,000 bytes, M = 1,000,000), in the given order.

    Raises
    ------
    InvalidInput
        An empty list, a value that is not a positive number of bytes, or one listed twice.

    Examples
    --------
    >>> parse_budgets("25k, 50K,100000")
    [25000, 50000, 100000]
    >>> parse_budgets(120000)
    [120000]
    """
    if isinstance(text, int) and not isinstance(text, bool):
        parts = [str(text)]
    else:
        parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise InvalidInput("--max-bytes needs at least one budget, e.g. 100k or 25k,50k,100k")
    out: list[int] = []
    for p in parts:
        m = _BUDGET.match(p)
        if not m:
            raise InvalidInput(
                f"budget {p.strip()!r} is not a number of bytes (e.g. 100000, 100k, 1.5M)"
            )
        v = float(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()]
        if v < 1 or v != int(v):
            raise InvalidInput(f"budget {p.strip()!r} must be a positive whole number of bytes")
        out.append(int(v))
    dup = sorted({v for v in out if out.count(v) > 1})
    if dup:
        raise InvalidInput(f"budgets listed twice: {dup}")
    return out


def fmt_budget(v: int) -> str:
    """``25000`` → ``"25k"``; other values in bytes.

    Examples
    --------
    >>> fmt_budget(25000), fmt_budget(1500)
    ('25k', '1500')
    """
    return f"{v // 1000}k" if v % 1000 == 0 else str(v)


def label(policy: str, value: int) -> str:
    """The run label of ``policy`` at budget ``value``: ``"curator@25k"``."""
    return f"{policy}@{fmt_budget(value)}"


def split_label(name: str) -> tuple[str, int | None]:
    """Inverse of :func:`label`: ``"curator@25k"`` → ``("curator", 25000)``; no ``@`` → None.

    Examples
    --------
    >>> split_label("curator/lambda=0@100k"), split_label("keep-all")
    (('curator/lambda=0', 100000), ('keep-all', None))
    """
    if "@" not in name:
        return name, None
    base, _, v = name.rpartition("@")
    try:
        return base, parse_budgets(v)[0]
    except InvalidInput:
        return name, None


def check_sweep(cfg: SweepConfig) -> None:
    """Check a sweep: the setting is an integer field of the config, values positive, unique.

    Raises
    ------
    InvalidInput
        Unknown setting, a value that is not a positive int, or a value listed twice.
    """
    fields = {f.name for f in dataclasses.fields(cfg)} - {"sweep_values", "sweep_setting"}
    if cfg.sweep_setting not in fields or not isinstance(getattr(cfg, cfg.sweep_setting), int):
        raise InvalidInput(
            f"cannot sweep {cfg.sweep_setting!r}; an integer bench setting is needed "
            f"(known: {sorted(k for k in fields if isinstance(getattr(cfg, k), int))})"
        )
    vals = list(cfg.sweep_values)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in vals):
        raise InvalidInput(f"sweep values must be positive integers, got {vals}")
    if len(set(vals)) != len(vals):
        raise InvalidInput(f"sweep values listed twice: {vals}")


def sweep_plan(cfg: C) -> list[tuple[str, str, C, tuple[str, int] | None]]:
    """One seed's runs of a sweep: (preset, label, config, (setting, value)) in run order.

    Bounded presets run once per value (label ``name@value``, config with the setting set);
    unbounded ones (``keep-all``, ``full-oracle``) once, unlabelled, as references.
    """
    from memcurator.policy import create_policy

    out: list[tuple[str, str, C, tuple[str, int] | None]] = []
    for p in cfg.policies:
        if not create_policy(p).bounded:
            out.append((p, p, cfg, None))
            continue
        for v in cfg.sweep_values:
            over: dict[str, Any] = {cfg.sweep_setting: v, "sweep_values": ()}
            run_cfg = dataclasses.replace(cfg, **over)
            out.append((p, label(p, v), run_cfg, (cfg.sweep_setting, v)))
    return out


# ------------------------------------------------------------------------------- the front
def _flag(v: Any) -> float:
    from memcurator.bench.compare import flag

    return flag(v)


def bootstrap_ci(
    per_seed: Sequence[np.ndarray], n_boot: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile CI of the pooled mean, tasks resampled within each seed.

    Parameters
    ----------
    per_seed : sequence of ndarray of shape (n_tasks_s,)
        0/1 outcomes of one seed each.

    Returns
    -------
    (lo, hi) : tuple of float
        NaN when there are no outcomes.

    Examples
    --------
    >>> lo, hi = bootstrap_ci([np.r_[np.ones(10), np.zeros(10)]])
    >>> 0.2 < lo < 0.5 < hi < 0.8
    True
    >>> bootstrap_ci([np.ones(10), np.zeros(10)])  # no spread within a seed: none in the mean
    (0.5, 0.5)
    """
    arrs = [np.asarray(a, dtype=np.float64) for a in per_seed if len(a)]
    if not arrs:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    n = 0
    for a in arrs:
        idx = rng.integers(0, len(a), size=(n_boot, len(a)))
        total += a[idx].sum(axis=1)
        n += len(a)
    means = total / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _num(v: Any) -> float:
    """A stored measure as float; None (JSON null for NaN) → NaN."""
    return float("nan") if v is None else float(v)


def _run_point(r: dict[str, Any]) -> tuple[str, int | None]:
    base = r.get("base_policy") or ""
    val = r.get("sweep_value")
    if base and val is not None:
        return str(base), int(val)
    return split_label(str(r["policy"]))


def front_rows(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]] = (),
    n_boot: int = 1000,
    axes: FrontAxes = BUDGET_AXES,
) -> list[dict[str, Any]]:
    """One row per (policy, budget) and per reference, from per-run metrics and records.

    Parameters
    ----------
    runs : sequence of dict
        :func:`~memcurator.bench.report.run_metrics` dicts (``summary.json``'s ``runs``), or
        any dicts with ``policy``, ``seed``, ``accuracy``, the x measure ``axes.x`` and, for a
        swept point, ``base_policy`` and ``sweep_value``.
    records : sequence of dict
        Per-task records (``records.csv`` rows, ``policy`` being the run's label); used for the
        bootstrap CIs when present.
    axes : FrontAxes, default BUDGET_AXES
        The x measure (``row["x"]``) and the reference ``x_of_ref`` divides by.

    Returns
    -------
    list of dict
        Keys: ``policy``, ``budget`` (None for a reference), ``label``, ``seeds``, ``peak_kb``,
        ``accuracy``, ``accuracy_lo``/``_hi``, ``victim_accuracy`` (+ ``_lo``/``_hi``),
        ``same_family_rate``, ``evictions`` (per seed), ``ci`` ("bootstrap" or "sd"),
        ``knee`` (bool), ``of_oracle`` (accuracy ÷ full-oracle's), ``x`` (the x measure, also
        under its own key), ``x_of_ref`` (x ÷ ``axes.x_ref``'s; ``kb_of_keep_all`` for the
        budget axes). Sorted by policy (in first-seen order) then budget.
    """
    by: dict[str, list[dict[str, Any]]] = {}
    key_of: dict[str, tuple[str, int | None]] = {}
    for r in runs:
        by.setdefault(str(r["policy"]), []).append(r)
        key_of[str(r["policy"])] = _run_point(r)
    recs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in records:
        recs.setdefault((str(rec["policy"]), str(rec["seed"])), []).append(rec)
    rows: list[dict[str, Any]] = []
    for lab, rs in by.items():
        pol, budget = key_of[lab]
        row: dict[str, Any] = {"policy": pol, "budget": budget, "label": lab, "seeds": len(rs)}
        for k in dict.fromkeys((axes.x, "accuracy", "victim_accuracy", "same_family_rate")):
            vals = np.array([_num(r.get(k)) for r in rs], dtype=np.float64)
            ok = vals[~np.isnan(vals)]
            row[k] = float(ok.mean()) if ok.size else float("nan")
            row[k + "_sd"] = float(ok.std(ddof=1)) if ok.size > 1 else 0.0
        row["evictions"] = float(
            np.mean([float((r.get("decisions") or {}).get("evict", 0)) for r in rs])
        )
        seeds = [str(r["seed"]) for r in rs]
        have = all((lab, s) in recs for s in seeds) and bool(seeds)
        row["ci"] = "bootstrap" if have else "sd"
        for k, sub in (("accuracy", None), ("victim_accuracy", "victim")):
            if have:
                per = [
                    np.array(
                        [
                            _flag(x["local_ok"])
                            for x in recs[(lab, s)]
                            if sub is None or x.get("subset") == sub
                        ]
                    )
                    for s in seeds
                ]
                row[k + "_lo"], row[k + "_hi"] = bootstrap_ci(per, n_boot)
            else:
                row[k + "_lo"] = row[k] - row[k + "_sd"]
                row[k + "_hi"] = row[k] + row[k + "_sd"]
        row["x"] = row[axes.x]
        rows.append(row)
    order = {p: i for i, p in enumerate(dict.fromkeys(r["policy"] for r in rows))}
    rows.sort(key=lambda r: (order[r["policy"]], r["budget"] is None, r["budget"] or 0))
    oracle = next((r for r in rows if r["policy"] == "full-oracle" and r["budget"] is None), None)
    ref = next((r for r in rows if r["policy"] == axes.x_ref and r["budget"] is None), None)
    for r in rows:
        r["of_oracle"] = (
            r["accuracy"] / oracle["accuracy"] if oracle and oracle["accuracy"] else (float("nan"))
        )
        r["x_of_ref"] = r["x"] / ref["x"] if ref and ref["x"] else float("nan")
        if axes.x == "peak_kb":
            r["kb_of_keep_all"] = r["x_of_ref"]
    for pol in order:
        pts = [r for r in rows if r["policy"] == pol and r["budget"] is not None]
        for r in pts:
            r["knee"] = False
        accs = [r["accuracy"] for r in pts if np.isfinite(r["accuracy"])]
        if len(pts) >= 2 and accs:
            best = max(accs)
            knee = next(r for r in pts if r["accuracy"] >= KNEE_SHARE * best)
            knee["knee"] = True
    return rows


def is_front(runs: Sequence[dict[str, Any]]) -> bool:
    """Whether the runs hold a budget front (some policy at two or more budgets)."""
    seen: dict[str, set[int]] = {}
    for r in runs:
        pol, b = _run_point(r)
        if b is not None:
            seen.setdefault(pol, set()).add(b)
    return any(len(v) >= 2 for v in seen.values())


def oracle_points(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Per swept policy, its smallest-budget row reaching 97% of full-oracle (None: never)."""
    out: dict[str, dict[str, Any] | None] = {}
    for r in rows:
        if r["budget"] is None:
            continue
        out.setdefault(r["policy"], None)
        if out[r["policy"]] is None and r["of_oracle"] >= KNEE_SHARE:
            out[r["policy"]] = r
    return out


def _ci(r: dict[str, Any], k: str) -> str:
    v = r[k]
    if not np.isfinite(v):
        return "—"
    return f"{v:.3f} [{r[k + '_lo']:.3f}, {r[k + '_hi']:.3f}]"


def front_markdown(rows: Sequence[dict[str, Any]], axes: FrontAxes = BUDGET_AXES) -> str:
    """The per-budget table as Markdown, then the knee and 97%-of-oracle lines.

    With ``axes.oracle`` False the ÷ oracle column gives way to x ÷ ``axes.x_ref``'s x.
    """
    last = "÷ oracle" if axes.oracle else f"÷ {axes.x_ref or 'reference'}'s"
    head = (
        f"| policy | {axes.setting} | {axes.x_label} | task acc [95% CI] | victim acc [95% CI] "
        f"| same-fam inj | evictions/seed | {last} | knee |"
    )
    out = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = (
            ("∞ (reference)" if axes.oracle else f"— ({axes.reference})")
            if r["budget"] is None
            else fmt_budget(int(r["budget"]))
        )
        ratio = r["of_oracle"] if axes.oracle else r["x_of_ref"]
        out.append(
            f"| {r['policy']} | {b} | {format(r['x'], axes.x_format)} | {_ci(r, 'accuracy')} | "
            f"{_ci(r, 'victim_accuracy')} | {r['same_family_rate']:.3f} | "
            f"{r['evictions']:.0f} | {ratio:.2f} | {'◆' if r.get('knee') else ''} |"
        )
    out.append("")
    ci = {r["ci"] for r in rows}
    out.append(
        "CI: "
        + (
            "95% bootstrap over tasks resampled within seeds."
            if ci == {"bootstrap"}
            else "mean ± sd over seeds (no records for a bootstrap)."
            if ci == {"sd"}
            else "bootstrap where records exist, else ± sd over seeds."
        )
        + f" Knee (◆): the smallest budget reaching {KNEE_SHARE:.0%} of the policy's best "
        "accuracy over the swept budgets."
    )
    pts = oracle_points(rows)
    if axes.oracle and pts and any(r["policy"] == "full-oracle" for r in rows):
        out.append("")
        for pol, pt in pts.items():
            if pt is None:
                best = max(
                    (x for x in rows if x["policy"] == pol and x["budget"] is not None),
                    key=lambda x: x["of_oracle"],
                )
                out.append(
                    f"- {pol}: never reaches {KNEE_SHARE:.0%} of full-oracle; best "
                    f"{best['of_oracle']:.0%} at {fmt_budget(int(best['budget']))}."
                )
            else:
                share = pt["kb_of_keep_all"]
                out.append(
                    f"- {pol}: reaches {KNEE_SHARE:.0%} of full-oracle at "
                    f"{fmt_budget(int(pt['budget']))} (peak {pt['peak_kb']:.1f} KB"
                    + (f", {share:.1%} of keep-all's" if np.isfinite(share) else "")
                    + ")."
                )
    return "\n".join(out)


def print_front(
    rows: Sequence[dict[str, Any]], console: Any, axes: FrontAxes = BUDGET_AXES
) -> None:
    """The per-budget table on a rich console."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=f"{axes.title} (◆ knee)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
    )
    last = "÷ oracle" if axes.oracle else f"÷ {axes.x_ref or 'reference'}"
    for c in ("policy", axes.setting, axes.x_label, "task acc [95% CI]", "victim acc [95% CI]",
              "evict/seed", last, "knee"):  # fmt: skip
        t.add_column(c, justify="left" if c == "policy" else "right", no_wrap=True)
    for r in rows:
        t.add_row(
            r["policy"],
            ("∞" if axes.oracle else axes.reference)
            if r["budget"] is None
            else fmt_budget(int(r["budget"])),
            format(r["x"], axes.x_format),
            _ci(r, "accuracy"),
            _ci(r, "victim_accuracy"),
            f"{r['evictions']:.0f}",
            f"{r['of_oracle'] if axes.oracle else r['x_of_ref']:.2f}",
            "◆" if r.get("knee") else "",
        )
    console.print(t)


def plot_front(
    path: Path, rows: Sequence[dict[str, Any]], title: str = "", axes: FrontAxes = BUDGET_AXES
) -> Path:
    """Two panels (task accuracy, victim accuracy) against the x measure (peak KB), log x.

    One line per swept policy with its 95% CI as a band, its knee as a diamond; each reference
    (a row without a budget: ``keep-all``, ``full-oracle``; the broadcasting policies of an
    uplink front) as a dashed or dotted horizontal line with a marker at its own x.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from memcurator.bench.plotting import finish_png

    fig, panels = plt.subplots(1, 2, figsize=(12, 4.8), sharex=True)
    pols = list(dict.fromkeys(r["policy"] for r in rows if r["budget"] is not None))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, k, name in (
        (panels[0], "accuracy", "task accuracy"),
        (panels[1], "victim_accuracy", "victim accuracy (post-drift)"),
    ):
        for i, pol in enumerate(pols):
            pts = [r for r in rows if r["policy"] == pol and r["budget"] is not None]
            x = np.array([r["x"] for r in pts])
            y = np.array([r[k] for r in pts])
            lo = np.array([r[k + "_lo"] for r in pts])
            hi = np.array([r[k + "_hi"] for r in pts])
            c = colors[i % len(colors)]
            ax.plot(x, y, "o-", color=c, label=pol, lw=1.4, ms=4)
            ax.fill_between(x, lo, hi, color=c, alpha=0.12, lw=0)
            for r in pts:
                if r.get("knee") and k == "accuracy":
                    ax.plot(r["x"], r[k], "D", color=c, ms=10, mfc="none", mew=2)
        refs = [x for x in rows if x["budget"] is None]
        for j, ref_row in enumerate(refs):
            if not np.isfinite(ref_row[k]):
                continue
            style = ("--", ":", "-.")[j % 3]
            ref_name = f"{ref_row['policy']} ({axes.reference})"
            ax.axhline(ref_row[k], color="black", ls=style, lw=1, label=ref_name)
            ax.plot(ref_row["x"], ref_row[k], "s", color="black", ms=5)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(
            "peak resident memory (KB, log scale)"
            if axes.x == "peak_kb"
            else f"{axes.x_label} (log scale)"
        )
        ax.set_ylabel(name)
        tops = [r[k + "_hi"] for r in rows if np.isfinite(r[k + "_hi"])]
        ax.set_ylim(0, min(1.02, max(tops, default=1.0) * 1.15 + 0.02))
        ax.grid(alpha=0.3, which="both")
    panels[0].legend(fontsize=7, loc="best")
    panels[0].set_title("task accuracy (band: 95% CI, ◇ knee)")
    panels[1].set_title("victim accuracy")
    if title:
        fig.suptitle(title)
    return finish_png(fig, path)


def write_front(
    out: Path,
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]] = (),
    axes: FrontAxes = BUDGET_AXES,
    stem: str = "budget_fronts",
) -> list[Path]:
    """Write ``<stem>.md``, ``.json`` and ``.png`` into ``out`` (if a front; else nothing)."""
    from memcurator.files import atomic_write, dumps_strict

    if not is_front(runs):
        return []
    rows = front_rows(runs, records, axes=axes)
    seeds = max(r["seeds"] for r in rows)
    name = "Budget fronts" if axes == BUDGET_AXES else axes.title[:1].upper() + axes.title[1:]
    title = f"{name} ({seeds} seed{'s' * (seeds > 1)})"
    md = front_markdown(rows, axes)
    paths = [
        atomic_write(out / f"{stem}.md", f"# {title}\n\n" + md + "\n"),
        atomic_write(out / f"{stem}.json", dumps_strict({"rows": rows}, indent=2)),
    ]
    try:
        paths.append(plot_front(out / f"{stem}.png", rows, title, axes))
    except ImportError:
        pass
    return paths


__all__ = [
    "BUDGET_AXES",
    "KNEE_SHARE",
    "FrontAxes",
    "bootstrap_ci",
    "check_sweep",
    "fmt_budget",
    "front_markdown",
    "front_rows",
    "is_front",
    "label",
    "oracle_points",
    "parse_budgets",
    "plot_front",
    "print_front",
    "split_label",
    "sweep_plan",
    "write_front",
]
