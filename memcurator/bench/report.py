"""Summaries of benchmark runs: per-run metrics, mean ± sd over seeds, tables, files, a plot."""

from __future__ import annotations

import csv
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from memcurator.bench.edm import memory_precision, retention_stability
from memcurator.bench.plotting import finish_png
from memcurator.bench.render import seeds_title, tables, to_markdown
from memcurator.bench.runner import PolicyRun
from memcurator.files import atomic_open, atomic_write, dumps_strict, json_safe

__all__ = [
    "json_safe",
    "markdown",
    "plot",
    "plot_over_time",
    "run_metrics",
    "summarize",
    "table",
    "write_results",
    "write_summary_json",
]


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else float("nan")


def run_metrics(run: PolicyRun) -> dict[str, Any]:
    """The measures of DESIGN.md for one (policy, seed) run."""
    rs = run.records
    victims = [r for r in rs if r.subset == "victim"]
    attack = [r for r in rs if r.subset == "attacker"]
    return {
        "policy": run.policy,
        "seed": run.seed,
        "tasks": len(rs),
        "accuracy": _mean([r.local_ok for r in rs]),
        "victim_accuracy": _mean([r.local_ok for r in victims]),
        "n_victim": len(victims),
        "attacker_accuracy": _mean([r.local_ok for r in attack]),
        "asr": _mean([r.payload_executed for r in attack]),
        "n_attacker": len(attack),
        "memory_precision": _mean([r.injected_same_family for r in rs if r.injected]),
        # EDM, Section 5.2 (memcurator.bench.edm): MP over injected entries, MRS over 5 cycles of
        # the agent's own episode PEI, steps per task (CER is steps over a baseline's, below)
        "edm_mp": memory_precision(
            [getattr(r, "injected_pei", float("nan")) for r in rs if r.injected]
        ),
        "n_injected": int(sum(1 for r in rs if r.injected)),
        "mrs": retention_stability([getattr(r, "local_pei", 0.0) for r in rs])
        if rs
        else float("nan"),
        "steps": _mean([getattr(r, "steps", 1) for r in rs]),
        "same_family_rate": _mean([r.injected_same_family for r in rs]),
        "poison_admitted": run.poison_admitted,
        "poison_written": run.poison_written,
        "poison_injected": int(sum(r.injected_poison for r in rs)),
        "peak_kb": max((r.resident_bytes for r in rs), default=0) / 1024,
        "final_entries": rs[-1].n_entries if rs else 0,
        "energy_mb": (rs[-1].energy_bytes / 1e6) if rs else 0.0,
        "escalations": int(sum(r.escalated for r in rs)),
        "escalation_rate": _mean([r.escalated for r in rs]),
        "cost_usd": float(sum(r.cost_usd for r in rs)),
        "tokens_in": _mean([r.tokens_in for r in rs]),
        "tokens_out": _mean([r.tokens_out for r in rs]),
        "mem_s": float(sum(r.mem_s for r in rs)),
        "llm_s": float(sum(r.llm_s for r in rs)),
        "cache_hit_rate": _mean([r.cached for r in rs]),
        # read-time curation and per-task resources (issue 12): JitMem's payload vs raw
        # injection, MemPilot's Eq. 14 cost and Eq. 17-19 latency proxy next to measured seconds
        "inject_tokens": _mean([r.inject_tokens for r in rs]),
        "curator_calls": _mean([r.curator_calls for r in rs]),
        "curator_tokens": _mean([r.curator_tokens for r in rs]),
        "judge_calls": _mean([r.judge_calls for r in rs]),
        "probe_calls": _mean([r.probe_calls for r in rs]),
        "cost_per_task": _mean([r.cost_usd for r in rs]),
        "curator_cost_usd": float(sum(r.curator_cost_usd for r in rs)),
        "latency_task_s": _mean([r.latency_s for r in rs]),
        "latency_proxy_s": _mean([r.latency_proxy_s for r in rs]),
        "payload_ratio": _ratio(
            sum(r.payload_chars for r in rs if r.raw_chars), sum(r.raw_chars for r in rs)
        ),
        "curate_fallbacks": int(sum("fell back" in r.curate_note for r in rs)),
        "wall_s": run.wall_s,
        "decisions": run.decisions,
        # the raw byte split, so that `bench --resume` restores the run exactly
        "bytes_by_part": dict(getattr(run, "bytes_by_part", None) or {}),
        # family coverage of the resident set (memcurator.bench.measures.FamilyCoverage)
        "family_coverage": float("nan"),
        "family_coverage_mean": float("nan"),
        **dict(getattr(run, "family_coverage", None) or {}),
        **_budget_metrics(run),
    }


def _budget_metrics(run: PolicyRun) -> dict[str, Any]:
    """The run's budget (and sweep point), and its resident bytes per entry by part."""
    out: dict[str, Any] = {
        "max_bytes": getattr(run, "budget", None),
        "base_policy": getattr(run, "base_policy", "") or run.policy,
    }
    sweep = getattr(run, "sweep", None)
    if sweep is not None:
        out["sweep_setting"], out["sweep_value"] = sweep[0], int(sweep[1])
    parts = getattr(run, "bytes_by_part", None) or {}
    n = int(parts.get("n", 0))
    if n:
        for k in ("text", "meta", "vec", "detail", "total"):
            out[f"entry_{k}_b"] = parts.get(k, 0) / n
        whole = parts["text"] + parts["meta"] + parts["vec"] + parts.get("detail", 0)
        out["vec_share"] = parts["vec"] / max(whole, 1)
    return out


def summarize(runs: list[PolicyRun] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and sd over seeds per policy (in the order policies first appear).

    ``runs`` are PolicyRun objects or their :func:`run_metrics` dicts (as stored in
    ``summary.json``, so runs from several result folders can be merged).
    """
    per: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        m = r if isinstance(r, dict) else run_metrics(r)
        per.setdefault(m["policy"], []).append(m)
    out = []
    for pol, ms in per.items():
        row: dict[str, Any] = {"policy": pol, "seeds": len(ms)}
        for key in ms[0]:
            vals = [m[key] for m in ms]
            if isinstance(vals[0], bool | int | float) and key != "seed":
                arr = np.array(vals, dtype=float)
                ok = arr[~np.isnan(arr)]
                row[key] = float(ok.mean()) if ok.size else float("nan")
                row[key + "_sd"] = float(ok.std(ddof=1)) if ok.size > 1 else 0.0
        out.append(row)
    # EDM's CER (Eq. 8): steps per task over a baseline's on the same streams
    base = next((r for r in out if r["policy"] == "no-memory"), None) or next(
        (r for r in out if r["policy"] == "keep-all"), None
    )
    for row in out:
        b = float(base.get("steps", float("nan"))) if base else float("nan")
        s_ = float(row.get("steps", float("nan")))
        ok = base is not None and math.isfinite(b) and math.isfinite(s_) and b > 0
        row["cer"] = s_ / b if ok else float("nan")
        row["cer_sd"] = 0.0
        row["cer_baseline"] = base["policy"] if ok and base else None
    return out


def table(summary: list[dict[str, Any]], width: int = 100) -> Any:
    """The summary as one rich Table (the first that fits ``width``; see
    :func:`memcurator.bench.render.tables` for all of them)."""
    return tables(summary, width)[0]


def markdown(summary: list[dict[str, Any]]) -> str:
    """The summary as a Markdown table (for notes and READMEs), n per measure in the header."""
    return to_markdown(summary)


def write_summary_json(path: Path, doc: dict[str, Any]) -> Path:
    """Write a summary document as strict JSON (NaN -> null), atomically."""
    return atomic_write(path, dumps_strict(doc, indent=2))


def write_results(
    out: Path, runs: list[PolicyRun], summary: list[dict[str, Any]], config: dict[str, Any]
) -> list[Path]:
    """Write records.csv, summary.csv, summary.md, two plots and, last, summary.json into ``out``.

    Every file is written to a temporary name and renamed into place, so an interrupted save
    leaves each file whole (old or new). ``summary.json`` goes last: it is the record of what was
    saved (``runs_done``), and never claims runs whose other files are not yet written.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    rec_path = out / "records.csv"
    with atomic_open(rec_path, "w", newline="") as f:
        w = None
        for run in runs:
            for r in run.records:
                d = asdict(r)
                if w is None:
                    w = csv.DictWriter(f, fieldnames=list(d))
                    w.writeheader()
                w.writerow(d)
    paths.append(rec_path)
    per_run = [run_metrics(r) for r in runs]
    cs = out / "summary.csv"
    keys = sorted({k for row in summary for k in row if not isinstance(row[k], dict)})
    keys.remove("policy")
    with atomic_open(cs, "w", newline="") as f:
        w2 = csv.DictWriter(f, fieldnames=["policy", *keys], extrasaction="ignore")
        w2.writeheader()
        for row in summary:
            w2.writerow(json_safe(row))
    paths.append(cs)
    paths.append(atomic_write(out / "summary.md", markdown(summary) + "\n"))
    try:
        paths.append(plot(out / "accuracy_vs_bytes.png", summary))
        rows = [asdict(r) for run in runs for r in run.records]
        if rows:
            paths.append(plot_over_time(out / "accuracy_over_time.png", rows))
        from memcurator.bench.fronts import has_sweep, plot_fronts

        if has_sweep(summary) and any("cost_per_task" in r for r in summary):
            paths.append(plot_fronts(out / "fronts.png", summary))
    except ImportError:
        pass
    from memcurator.bench.budget_fronts import write_front

    paths += write_front(out, per_run, [asdict(r) for run in runs for r in run.records])
    doc = {"config": config, "summary": summary, "runs": per_run}
    paths.append(write_summary_json(out / "summary.json", doc))
    return paths


def plot(path: Path, summary: list[dict[str, Any]]) -> Path:
    """Scatter of task accuracy against peak resident KB, one point per policy (± sd bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    markers = "osD^v<>phX*P"
    for i, row in enumerate(summary):
        ax.errorbar(
            row["peak_kb"],
            row["accuracy"],
            xerr=row.get("peak_kb_sd", 0) or 0,
            yerr=row.get("accuracy_sd", 0) or 0,
            fmt=markers[i % len(markers)],
            capsize=3,
            label=row["policy"],
            alpha=0.85,
        )
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_xlabel("peak resident memory (KB)")
    ax.set_ylabel("local task accuracy")
    ax.set_title(f"Accuracy vs footprint per policy ({seeds_title(summary)})")
    ax.grid(alpha=0.3)
    return finish_png(fig, path)


def plot_over_time(path: Path, records: list[dict[str, Any]], window: int = 50) -> Path:
    """Rolling local accuracy against the task step, one line per policy (mean over seeds).

    Dotted vertical lines mark the first victim task (after the schema drift) and the first
    attacker-query task (after the poison was written), read from the records themselves.

    Parameters
    ----------
    path : Path
        PNG file to write.
    records : list of dict
        Per-task records (``records.csv`` rows or ``asdict(TaskRecord)``): ``policy``, ``seed``,
        ``step``, ``local_ok``, ``subset``.
    window : int, default 50
        Tasks per trailing window (fewer at the start of the stream).

    Raises
    ------
    InvalidInput
        No records, or ``window < 1``.
    """
    from memcurator.bench.compare import flag
    from memcurator.errors import InvalidInput

    if not records:
        raise InvalidInput("no records to plot")
    if window < 1:
        raise InvalidInput(f"window must be >= 1 tasks, got {window!r}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = 1 + max(int(r["step"]) for r in records)
    per: dict[str, dict[str, np.ndarray]] = {}
    for r in records:
        runs = per.setdefault(str(r["policy"]), {})
        arr = runs.setdefault(str(r["seed"]), np.full(n, np.nan))
        arr[int(r["step"])] = flag(r["local_ok"])
    first: dict[str, int] = {}
    for r in records:
        sub = str(r.get("subset", ""))
        if sub in ("victim", "attacker"):
            first[sub] = min(first.get(sub, n), int(r["step"]))
    fig, ax = plt.subplots(figsize=(9, 4.8))
    styles = ["-", "--", "-.", ":"]
    kernel = np.ones(window)
    for i, (pol, runs) in enumerate(per.items()):
        mean = np.nanmean(np.vstack(list(runs.values())), axis=0)
        ok = ~np.isnan(mean)
        num = np.convolve(np.where(ok, mean, 0.0), kernel)[:n]
        den = np.convolve(ok.astype(float), kernel)[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            rolling = num / den
        ax.plot(np.arange(n), rolling, styles[(i // 10) % len(styles)], label=pol, lw=1.3)
    for sub, label in (
        ("victim", "first victim task (drift)"),
        ("attacker", "first attacker query"),
    ):
        if sub in first:
            ax.axvline(first[sub], color="grey", ls=":", lw=1)
            ax.text(first[sub], 1.0, " " + label, fontsize=7, va="top", rotation=90, color="grey")
    seeds = max(len(v) for v in per.values())
    ax.set_xlabel("task step")
    ax.set_ylabel(f"local accuracy, trailing {window} tasks")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Accuracy over the stream (mean of {seeds} seed{'s' * (seeds > 1)})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return finish_png(fig, path)


def read_summary(folder: Path) -> dict[str, Any]:
    """Read and check a results folder's ``summary.json``.

    Parameters
    ----------
    folder : Path
        A folder written by ``memcurator bench`` or ``memcurator report --out``.

    Returns
    -------
    dict
        The document, with ``runs`` a list of per-run dicts and ``config`` a dict.

    Raises
    ------
    InvalidInput
        One line for every way the file can be unreadable: the folder or file is missing,
        ``summary.json`` is a folder, not UTF-8, not (or truncated) JSON, or lacks the runs of a
        memcurator bench summary.
    """
    import json

    from memcurator.errors import InvalidInput

    path = Path(folder) / "summary.json"
    if not Path(folder).is_dir():
        raise InvalidInput(f"no results folder {str(folder)!r} (no summary.json in {folder})")
    if not path.exists():
        raise InvalidInput(f"no summary.json in {folder}")
    bad = f"{path} is not a memcurator bench summary"
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except IsADirectoryError:
        raise InvalidInput(f"{bad}: it is a folder") from None
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{bad}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{bad}: not JSON ({e.msg} at line {e.lineno})") from None
    except OSError as e:
        raise InvalidInput(f"{bad}: cannot read it ({e.strerror})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise InvalidInput(f"{bad}: no list of runs")
    for r in doc["runs"]:
        if not isinstance(r, dict) or not {"policy", "seed", "tasks"} <= set(r):
            raise InvalidInput(f"{bad}: a run lacks its policy, seed or tasks")
    if not isinstance(doc.get("config") or {}, dict):
        raise InvalidInput(f"{bad}: its config is not an object")
    doc["config"] = doc.get("config") or {}
    return doc
