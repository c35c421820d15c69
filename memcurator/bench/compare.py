"""Paired comparison of policies on the same task streams.

Within a seed every policy sees the same stream, so two policies' outcomes on one task form a
pair. :func:`paired_differences` reports, for each policy against a baseline, the mean difference
of a per-task 0/1 outcome (default: local success) with a 95% bootstrap interval that resamples
tasks within each seed, the discordant counts (tasks only the policy solved / only the baseline
solved) and the exact McNemar p-value on them. This is sharper than comparing mean ± sd over three
seeds, whose spread mixes stream difficulty into the comparison.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput

#: per-task 0/1 outcomes in ``records.csv`` that can be compared
OUTCOMES = ("local_ok", "escalated", "payload_executed", "injected_same_family")
#: task subsets of the SQL stream
SUBSETS = ("clean", "victim", "attacker")


def read_records(
    folders: Iterable[Path], key: Sequence[str] = ("policy", "seed")
) -> list[dict[str, Any]]:
    """Read ``records.csv`` of bench result folders; a later folder's run (``key``) wins.

    Parameters
    ----------
    folders : iterable of Path
        Result folders written by ``memcurator bench``.
    key : sequence of str, default ("policy", "seed")
        Columns naming one run: the rows of a run found in a later folder replace those of
        earlier folders (a rerun). Peer-group records use ``("policy", "seed", "uplink")``.

    Returns
    -------
    list of dict
        One dict per (policy, seed, step) with the CSV's columns (strings as written).

    Raises
    ------
    FileNotFoundError
        A folder without ``records.csv``.
    InvalidInput
        ``records.csv`` is a folder, not UTF-8, or lacks the step column or a ``key`` column.
    """
    runs: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    need = {"step", *key}
    for f in folders:
        path = Path(f) / "records.csv"
        if not path.exists():
            raise FileNotFoundError(f"no records.csv in {f}")
        bad = f"{path} is not a memcurator bench records file"
        here: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                if not need <= set(reader.fieldnames or ()):
                    raise InvalidInput(f"{bad}: no {', '.join(sorted(need))} columns")
                for row in reader:
                    here.setdefault(tuple(row[k] for k in key), []).append(row)
        except IsADirectoryError:
            raise InvalidInput(f"{bad}: it is a folder") from None
        except UnicodeDecodeError as e:
            raise InvalidInput(f"{bad}: not UTF-8 text ({e.reason})") from None
        except (OSError, csv.Error) as e:
            raise InvalidInput(f"{bad}: {e}") from None
        runs.update(here)
    return [r for rows in runs.values() for r in rows]


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write ``records`` (as from :func:`read_records`) to a CSV file; returns ``path``.

    Raises
    ------
    InvalidInput
        No records.
    """
    if not records:
        raise InvalidInput("no records to write")
    from memcurator.files import atomic_open

    with atomic_open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    return Path(path)


def flag(v: object) -> float:
    """A 0/1 outcome as written in records (bool, or its CSV text) → 1.0 / 0.0.

    Raises
    ------
    InvalidInput
        Anything else.

    Examples
    --------
    >>> flag("True"), flag(False)
    (1.0, 0.0)
    """
    if v in (True, "True", "1", "true"):
        return 1.0
    if v in (False, "False", "0", "false"):
        return 0.0
    raise InvalidInput(f"not a 0/1 outcome: {v!r}")


def mcnemar_p(wins: int, losses: int) -> float:
    """Exact two-sided McNemar p-value: a binomial test of ``wins`` of ``wins + losses`` at 1/2.

    Examples
    --------
    >>> round(mcnemar_p(10, 0), 4)
    0.002
    >>> mcnemar_p(0, 0)
    1.0
    """
    from scipy.stats import binomtest

    n = wins + losses
    if n == 0:
        return 1.0
    return float(binomtest(wins, n, 0.5).pvalue)


def resample_within(
    groups: Sequence[Any], n_boot: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """``n_boot`` bootstrap resamples of the positions of ``groups`` (one label per paired
    task, e.g. its seed), each drawn with replacement within its group: the resampling of
    :func:`paired_differences`, for any statistic of paired arrays.

    Examples
    --------
    >>> idx = list(resample_within(["a", "a", "b"], 3, np.random.default_rng(0)))
    >>> len(idx), all(i[-1] == 2 for i in idx)
    (3, True)
    """
    labels = np.asarray(groups)
    members = [np.flatnonzero(labels == s) for s in np.unique(labels)]
    for _ in range(n_boot):
        yield np.concatenate([g[rng.integers(0, g.size, g.size)] for g in members])


def paired_differences(
    records: list[dict[str, Any]],
    baseline: str,
    *,
    outcome: str = "local_ok",
    subset: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Each policy against ``baseline`` on the tasks both ran (paired by seed and step).

    Parameters
    ----------
    records : list of dict
        Per-task records (see :func:`read_records`).
    baseline : str
        Policy every other policy is compared with.
    outcome : str, default "local_ok"
        A 0/1 column of ``records.csv`` (one of :data:`OUTCOMES`).
    subset : str, optional
        Only tasks of this subset ("clean", "victim", "attacker").
    n_boot : int, default 2000
        Bootstrap resamples (tasks resampled with replacement within each seed).
    seed : int, default 0
        Seed of the bootstrap.

    Returns
    -------
    list of dict
        Per policy: ``n`` pairs, ``rate`` and ``baseline_rate``, ``diff`` (mean of policy −
        baseline), ``lo``/``hi`` (95% percentile interval), ``wins``/``losses`` (discordant
        pairs), ``p`` (exact McNemar).

    Raises
    ------
    InvalidInput
        Unknown outcome or subset, no records of the baseline or of any other policy,
        ``n_boot < 100``, or two runs of one seed on different streams (the task at a step
        differs).

    Examples
    --------
    >>> rows = [{"policy": p, "seed": "0", "step": str(i), "subset": "clean",
    ...          "local_ok": str(ok)} for p, oks in (("a", [1, 1, 1, 0]), ("b", [0, 0, 1, 0]))
    ...         for i, ok in enumerate(oks)]
    >>> d = paired_differences(rows, "b", n_boot=200)[0]
    >>> (d["policy"], d["n"], d["diff"], d["wins"], d["losses"])
    ('a', 4, 0.5, 2, 0)
    """
    if outcome not in OUTCOMES:
        raise InvalidInput(f"unknown outcome {outcome!r}; known: {list(OUTCOMES)}")
    if n_boot < 100:
        raise InvalidInput(f"n_boot must be >= 100 resamples, got {n_boot!r}")
    if subset is not None and subset not in SUBSETS:
        raise InvalidInput(f"unknown subset {subset!r}; known: {list(SUBSETS)}")
    task_at: dict[tuple[str, str], tuple[str, str]] = {}
    for r in records:
        key, tid = (r["seed"], r["step"]), r.get("task_id")
        if tid is None:
            continue
        first = task_at.setdefault(key, (tid, r["policy"]))
        if first[0] != tid:
            raise InvalidInput(
                f"seed {key[0]} step {key[1]}: {first[1]} ran task {first[0]} but {r['policy']} "
                f"ran {tid}; these runs come from different streams (other --tasks, --families, "
                "...) and cannot be paired"
            )
    by_pol: dict[str, dict[tuple[str, str], float]] = {}
    for r in records:
        if subset is not None and r.get("subset") != subset:
            continue
        by_pol.setdefault(r["policy"], {})[(r["seed"], r["step"])] = flag(r[outcome])
    if baseline not in by_pol:
        raise InvalidInput(
            f"no records of baseline {baseline!r}"
            + (f" in subset {subset!r}" if subset else "")
            + f"; policies: {sorted(by_pol)}"
        )
    base = by_pol[baseline]
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for pol, vals in by_pol.items():
        if pol == baseline:
            continue
        keys = sorted(set(vals) & set(base))
        if not keys:
            continue
        a = np.array([vals[k] for k in keys])
        b = np.array([base[k] for k in keys])
        d = a - b
        boots = np.array(
            [d[idx].mean() for idx in resample_within([k[0] for k in keys], n_boot, rng)]
        )
        wins = int(np.sum(d > 0))
        losses = int(np.sum(d < 0))
        out.append(
            {
                "policy": pol,
                "n": len(keys),
                "rate": float(a.mean()),
                "baseline_rate": float(b.mean()),
                "diff": float(d.mean()),
                "lo": float(np.percentile(boots, 2.5)),
                "hi": float(np.percentile(boots, 97.5)),
                "wins": wins,
                "losses": losses,
                "p": mcnemar_p(wins, losses),
            }
        )
    if not out:
        raise InvalidInput(
            f"no policy other than {baseline!r} shares tasks with it; policies: {sorted(by_pol)}"
        )
    return out


#: the columns of the comparison table, after the outcome's and the baseline's rates
COLUMNS = ("policy", "n", "Δ", "95% CI", "only policy", "only base", "p")


def rich_table(
    rows: list[dict[str, Any]], baseline: str, *, outcome: str = "local_ok", subset: str | None
) -> Any:
    """The comparison as a rich Table: the outcome's rate, the baseline's, then :data:`COLUMNS`."""
    from rich.table import Table

    what = outcome + (f" on {subset} tasks" if subset else "")
    t = Table(title=f"{what}: each policy − {baseline}, paired by (seed, task)")
    for col in (*COLUMNS[:2], outcome, baseline, *COLUMNS[2:]):
        t.add_column(col, justify="right", no_wrap=col == "policy")  # names stay whole
    for r in rows:
        t.add_row(
            r["policy"],
            str(r["n"]),
            f"{r['rate']:.3f}",
            f"{r['baseline_rate']:.3f}",
            f"{r['diff']:+.3f}",
            f"[{r['lo']:+.3f}, {r['hi']:+.3f}]",
            str(r["wins"]),
            str(r["losses"]),
            f"{r['p']:.2g}",
        )
    return t


def markdown(rows: list[dict[str, Any]], baseline: str, outcome: str = "local_ok") -> str:
    """The comparison as a Markdown table."""
    lines = [
        f"| policy | n | {outcome} | {baseline} | Δ | 95% CI | only policy | only {baseline} | "
        "McNemar p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {r['n']} | {r['rate']:.3f} | {r['baseline_rate']:.3f} | "
            f"{r['diff']:+.3f} | [{r['lo']:+.3f}, {r['hi']:+.3f}] | {r['wins']} | {r['losses']} | "
            f"{r['p']:.2g} |"
        )
    return "\n".join(lines)
