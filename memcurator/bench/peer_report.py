"""Results of a peer-group run: pooled tables, paired comparisons, the uplink front, the files.

A results folder of ``memcurator bench --peers M`` holds

- ``records.csv``: one row per (policy, seed, uplink, outside on/off, agent, task), the columns of
  the single-agent records (:class:`~memcurator.bench.agent.TaskRecord`, less
  ``injected_poison``) plus ``uplink``, ``broadcast``, ``outside``, ``agent``,
  ``attack_channel``, ``attack_resident`` and ``asr_hit`` (see
  :func:`memcurator.bench.peers.run_group`);
- ``peers.json`` / ``peers.txt``: one entry per (policy, seed, uplink) run, the per-channel table;
- ``peers.md``: the pooled table over seeds, the paired comparisons below, and the uplink front;
- ``uplink_front.md`` / ``.json`` / ``.png`` when some policy ran at two or more budgets L;
- ``summary.json`` (written last): the settings (``kind: "peers"``, ``complete``) and the runs.

Paired comparisons reuse :func:`memcurator.bench.compare.paired_differences`: a task is paired
with itself under the other condition (same seed, agent and step: the streams are the same), and
the bootstrap resamples tasks within each (seed, agent).

- **outside − isolated** per (policy, L): accuracy with outside traffic (exchange, external feed,
  attacks) minus accuracy without, on the same streams. Issue 10 asks for "≥": the verdict is
  ``better`` when the 95% CI lies above 0, ``no worse`` when it contains 0, ``worse`` below.
- **policy − baseline** per L, both with outside traffic (the baseline, e.g. ``lru``, broadcasts
  every new entry and is paired at its own budget, which does not bind it), next to the ratio of
  uplink bytes per round. "≤ ½ of broadcast at accuracy within the paired CI": ``bytes ≤ ½`` and
  the CI's upper end ≥ 0 (the policy is not measurably less accurate).

References
----------
CURATOR, Sec. III-D and V (Share under an uplink budget, Table V, Fig. 6b).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memcurator.bench.budget_fronts import FrontAxes, label, write_front
from memcurator.bench.compare import flag, paired_differences, resample_within
from memcurator.errors import InvalidInput

#: the uplink front: accuracy against uplink bytes per round, one point per budget L
UPLINK_AXES = FrontAxes(
    x="uplink_bytes_per_round",
    x_label="uplink B/round",
    x_format=".0f",
    setting="L",
    reference="broadcast",
    x_ref="",
    oracle=False,
    title="uplink front — accuracy against uplink bytes per round",
)
#: per-run settings that must agree for peer-group folders to be merged
PEER_KEYS = (
    "peers",
    "tasks",
    "share_every",
    "outside_rate",
    "attack",
    "attack_at",
    "families",
    "zipf",
    "drift",
    "max_bytes",
    "inject_chars",
    "max_turns",
    "executor",
    "vector_dtype",
    "payloads",
    "workload",
    "cross",
    "join_after",
)
_CHANNELS = ("external", "peer", "self")


def arm(r: dict[str, Any]) -> str:
    """The arm of a peer record: ``share`` (with outside traffic), ``isolated`` or ``pooled``
    (records written before the pooled reference have no ``arm``: read from ``outside``).

    Examples
    --------
    >>> arm({"outside": "True"}), arm({"outside": False}), arm({"outside": False, "arm": "pooled"})
    ('share', 'isolated', 'pooled')
    """
    a = r.get("arm")
    if a:
        return str(a)
    return "share" if flag(r["outside"]) else "isolated"


def _arm_outcomes(
    records: Sequence[dict[str, Any]], pol: str, L: int
) -> dict[str, dict[tuple[str, str], float]]:
    """Per arm of ``pol`` at ``L``: (seed/agent, step) -> local success (0/1)."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for r in records:
        if str(r["policy"]) != pol or int(r["uplink"]) != L:
            continue
        key = (f"{r['seed']}/{r['agent']}", str(r["step"]))
        out.setdefault(arm(r), {})[key] = flag(r["local_ok"])
    return out


def _gain_share(s: np.ndarray, i: np.ndarray, p: np.ndarray) -> float:
    """(mean s − mean i) / (mean p − mean i); NaN when pooling gains nothing (≤ 0)."""
    den = p.mean() - i.mean()
    return float((s.mean() - i.mean()) / den) if den > 0 else float("nan")


def _paired_arms(
    records: Sequence[dict[str, Any]], pol: str, L: int
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray] | None:
    """The (seed/agent, step) keys that all three arms (share, isolated, pooled) ran at
    (policy ``pol``, uplink ``L``), sorted, and each arm's outcomes on them, shape (n,);
    None when an arm is missing."""
    by = _arm_outcomes(records, pol, L)
    if not {"share", "isolated", "pooled"} <= set(by):
        return None
    keys = sorted(set(by["share"]) & set(by["isolated"]) & set(by["pooled"]))
    s, i, p = (np.array([by[a][k] for k in keys]) for a in ("share", "isolated", "pooled"))
    return keys, s, i, p


def _arm_means(pol: str, L: int, s: np.ndarray, i: np.ndarray, p: np.ndarray) -> dict[str, Any]:
    """The leading fields of a paired row: the point, the pair count and each arm's mean."""
    return {
        "policy": pol,
        "uplink": L,
        "n": len(s),
        "share": float(s.mean()),
        "isolated": float(i.mean()),
        "pooled": float(p.mean()),
    }


def _ci95(ok: np.ndarray) -> dict[str, float]:
    """``lo``/``hi``: the 2.5 and 97.5 percentiles of the finite bootstrap values ``ok`` (NaN
    when there are none)."""
    nan = float("nan")
    return {
        "lo": float(np.percentile(ok, 2.5)) if ok.size else nan,
        "hi": float(np.percentile(ok, 97.5)) if ok.size else nan,
    }


def pooled_gain(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    baseline: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Per (policy, L): the share of the pooled gain captured,
    ``(acc_share − acc_isolated) / (acc_pooled − acc_isolated)``, with a paired bootstrap CI.

    The three arms of a policy run the same streams: a task is paired with itself under each
    (same seed, agent and step), and the bootstrap resamples tasks within each (seed, agent)
    (:func:`memcurator.bench.compare.resample_within`, the resampling of the paired
    comparisons). A resample whose pooled gain is ≤ 0 has no ratio (left out; ``undefined``
    counts them).

    Parameters
    ----------
    runs : sequence of dict
        :func:`~memcurator.bench.peers.to_json` dicts (uplink bytes per round).
    records : sequence of dict
        Peer records of the three arms (``arm``).
    baseline : str, optional
        A broadcasting policy: ``bytes_ratio`` is each policy's uplink bytes ÷ its bytes.

    Returns
    -------
    list of dict
        ``policy``, ``uplink``, ``n`` (tasks in all three arms), ``share``, ``isolated``,
        ``pooled`` (accuracies on those tasks), ``gain`` (pooled − isolated), ``captured``
        (the share of the gain), ``lo``/``hi`` (95% CI), ``undefined`` (resamples without a
        pooled gain), ``bytes`` (uplink bytes per round and agent, mean over seeds),
        ``bytes_ratio``. [] without pooled records.

    Examples
    --------
    >>> recs = [{"policy": "c", "uplink": 5, "seed": 0, "agent": "a", "step": t,
    ...          "arm": a, "outside": a == "share", "local_ok": ok}
    ...         for a, oks in (("share", [1, 1, 0, 0]), ("isolated", [1, 0, 0, 0]),
    ...                        ("pooled", [1, 1, 1, 0])) for t, ok in enumerate(oks)]
    >>> runs = [{"policy": "c", "uplink": 5, "seed": 0, "uplink_bytes_per_round": 10.0}]
    >>> round(pooled_gain(runs, recs, n_boot=200)[0]["captured"], 3)
    0.5
    """
    rng = np.random.default_rng(seed)
    bytes_of: dict[tuple[str, int], list[float]] = {}
    for r in runs:
        bytes_of.setdefault((str(r["policy"]), int(r["uplink"])), []).append(
            _nan(r.get("uplink_bytes_per_round"))
        )
    base_bytes = float("nan")
    if baseline is not None:
        bb = [v for (p, _), vs in bytes_of.items() if p == baseline for v in vs]
        base_bytes = float(np.nanmean(bb)) if bb else float("nan")
    out = []
    for pol, L in _points([r for r in records if arm(r) == "share"]):
        paired = _paired_arms(records, pol, L)
        if paired is None or not paired[0]:
            continue
        keys, s, i, p = paired
        idx = resample_within([k[0] for k in keys], n_boot, rng)
        boots = np.array([_gain_share(s[x], i[x], p[x]) for x in idx])
        ok = boots[np.isfinite(boots)]
        b = float(np.nanmean(bytes_of.get((pol, L), [float("nan")])))
        out.append(
            {
                **_arm_means(pol, L, s, i, p),
                "gain": float(p.mean() - i.mean()),
                "captured": _gain_share(s, i, p),
                **_ci95(ok),
                "undefined": int(boots.size - ok.size),
                "bytes": b,
                "bytes_ratio": b / base_bytes if base_bytes > 0 else float("nan"),
            }
        )
    return out


def cold_start(
    records: Sequence[dict[str, Any]], first: int = 50, n_boot: int = 2000, seed: int = 0
) -> list[dict[str, Any]]:
    """Per (policy, L): the newcomer's first ``first`` tasks after it joined (``joined_at``
    > 0, the ``cold-start`` workload) in each arm, and its share accuracy ÷ pooled's with a
    paired bootstrap CI (tasks resampled within seed, as :func:`pooled_gain`). [] when no
    record has a newcomer.

    Examples
    --------
    >>> recs = [{"policy": "c", "uplink": 5, "seed": 0, "agent": "a0", "step": t,
    ...          "joined_at": 2, "arm": a, "outside": a == "share", "local_ok": ok}
    ...         for a, oks in (("share", [1, 0]), ("isolated", [0, 0]), ("pooled", [1, 1]))
    ...         for t, ok in zip((2, 3), oks)]
    >>> r = cold_start(recs, n_boot=200)[0]
    >>> (r["n"], r["share"], r["pooled"], r["ratio"])
    (2, 0.5, 1.0, 0.5)
    """
    new = [
        r
        for r in records
        if int(float(r.get("joined_at") or 0)) > 0
        and 0 <= int(r["step"]) - int(float(r["joined_at"])) < first
    ]
    rng = np.random.default_rng(seed)
    out = []
    for pol, L in _points([r for r in new if arm(r) == "share"]):
        paired = _paired_arms(new, pol, L)
        if paired is None:
            continue
        keys, s, i, p = paired
        ratio = float(s.mean() / p.mean()) if p.mean() > 0 else float("nan")
        boots = np.array(
            [
                s[x].mean() / p[x].mean() if p[x].mean() > 0 else np.nan
                for x in resample_within([k[0] for k in keys], n_boot, rng)
            ]
        )
        ok = boots[np.isfinite(boots)]
        out.append({**_arm_means(pol, L, s, i, p), "ratio": ratio, **_ci95(ok)})
    return out


def claim_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, L): the outcome-claim counts summed over seeds
    (:data:`memcurator.bench.peers.CLAIM_FIELDS`), the receivers where the compromised peer
    lost good standing and the failures that took (``k``: each receiver's, and their mean).
    [] for runs without claims.

    Examples
    --------
    >>> c = {"genuine_offered": 4, "false_released": 2, "caught": 1, "caught_after": [2]}
    >>> r = claim_rows([{"policy": "c", "uplink": 5, "seed": s, "claims": c} for s in (0, 1)])
    >>> r[0]["genuine_offered"], r[0]["k"], r[0]["k_mean"]
    (8, [2, 2], 2.0)
    """
    from memcurator.bench.peers import CLAIM_FIELDS

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in runs:
        c = r.get("claims") or {}
        if not c:
            continue
        key = (str(r["policy"]), int(r["uplink"]))
        row = out.setdefault(
            key,
            {"policy": key[0], "uplink": key[1], "seeds": 0, "k": [],
             **dict.fromkeys(CLAIM_FIELDS, 0)},
        )  # fmt: skip
        row["seeds"] += 1
        for f in CLAIM_FIELDS:
            row[f] += int(c.get(f, 0) or 0)
        row["k"] += [int(k) for k in c.get("caught_after") or []]
    rows = list(out.values())
    for row in rows:
        row["k_mean"] = float(np.mean(row["k"])) if row["k"] else float("nan")
    return rows


def _reference_data(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    baseline: str | None,
    n_boot: int,
) -> dict[str, Any]:
    """The pooled-gain, cold-start and claim rows of a folder (empty lists when none)."""
    from memcurator.bench.peers import COLD_START_TASKS

    return {
        "pooled_gain": pooled_gain(runs, records, baseline, n_boot=n_boot),
        "cold_start": cold_start(records, COLD_START_TASKS, n_boot=n_boot),
        "claims": claim_rows(runs),
    }


def _reference_markdown(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    baseline: str | None,
    n_boot: int,
) -> list[str]:
    """``peers.md``'s sections on the pooled reference, the cold-start newcomer and the
    outcome claims (nothing for a folder without pooled records or claims)."""
    d = _reference_data(runs, records, baseline, n_boot)
    lines: list[str] = []
    if d["pooled_gain"]:
        lines += [
            "## Share of the pooled gain",
            "",
            "Pooled: every agent reads and writes one shared namespace (one memory of the "
            "group's whole budget, no outside traffic): what sharing could give at most. "
            "Captured = (acc share − acc isolated) / (acc pooled − acc isolated), on the tasks "
            "of all three arms; 95% CI: paired bootstrap over tasks within (seed, agent) "
            "(resamples without a pooled gain left out, counted as 'undef.'). B/round: uplink "
            "bytes per agent and round on the wire"
            + (f"; ÷ {baseline}: of the broadcast's." if baseline else "."),
            "",
            "| policy | L | n | isolated | share | pooled | pooled − isolated | captured | "
            "95% CI | undef. | B/round | ÷ broadcast |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {g['policy']} | {g['uplink']} | {g['n']} | {g['isolated']:.3f} | "
                f"{g['share']:.3f} | {g['pooled']:.3f} | {g['gain']:+.3f} | "
                f"{_fmt(g['captured'], '.2f')} | [{_fmt(g['lo'], '.2f')}, {_fmt(g['hi'], '.2f')}] "
                f"| {g['undefined']} | {_fmt(g['bytes'], '.0f')} | "
                f"{_fmt(g['bytes_ratio'], '.3f')} |"
                for g in d["pooled_gain"]
            ),
        ]
    if d["cold_start"]:
        lines += [
            "",
            "## Cold start: the newcomer's first tasks",
            "",
            "The agent that joined with an empty memory after the others ran `joined_at` tasks: "
            "accuracy on its first 50 tasks in each arm; ratio = share ÷ pooled (95% CI: "
            "bootstrap over its tasks).",
            "",
            "| policy | L | n | isolated | share | pooled | share ÷ pooled | 95% CI |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {c['policy']} | {c['uplink']} | {c['n']} | {c['isolated']:.3f} | "
                f"{c['share']:.3f} | {c['pooled']:.3f} | {_fmt(c['ratio'], '.2f')} | "
                f"[{_fmt(c['lo'], '.2f')}, {_fmt(c['hi'], '.2f')}] |"
                for c in d["cold_start"]
            ),
        ]
    if d["claims"]:
        lines += [
            "",
            "## Signed outcomes: releases and the compromised peer",
            "",
            "Honest: entries offered with the sender's signed verified outcome / released off "
            "probation on it. False: the compromised peer's false records (another variant's "
            "answer) with forged passing outcomes, offered / admitted / released; used = tasks "
            "they were injected into (in standing: before the peer lost good standing at that "
            "receiver). Caught: receivers where it lost standing; k: failures of its "
            "claim-released entries that took, per receiver. Honest lost: honest peers that "
            "lost standing at some receiver (false alarms).",
            "",
            "| policy | L | seeds | honest offered / released | false offered / admitted / "
            "released | false used (in standing) | caught | k (mean) | honest lost |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {c['policy']} | {c['uplink']} | {c['seeds']} | {c['genuine_offered']} / "
                f"{c['genuine_released']} | {c['false_offered']} / {c['false_admitted']} / "
                f"{c['false_released']} | {c['false_uses']} ({c['false_uses_in_standing']}) | "
                f"{c['caught']} | {c['k']} ({_fmt(c['k_mean'], '.1f')}) | {c['honest_lost']} |"
                for c in d["claims"]
            ),
        ]
    return lines


def verdict(lo: float, hi: float) -> str:
    """``better`` (95% CI above 0), ``worse`` (below 0) or ``no worse`` (it contains 0).

    Examples
    --------
    >>> verdict(0.01, 0.2), verdict(-0.1, 0.1), verdict(-0.3, -0.02)
    ('better', 'no worse', 'worse')
    """
    if lo > 0:
        return "better"
    if hi < 0:
        return "worse"
    return "no worse"


def _pairs(
    records: Sequence[dict[str, Any]], name: Callable[[dict[str, Any]], str | None]
) -> list[dict[str, Any]]:
    """Records in :func:`paired_differences`' shape: ``policy`` = ``name(r)`` (None: left out),
    ``seed`` = "seed/agent" so that tasks pair within and resample within (seed, agent)."""
    out = []
    for r in records:
        n = name(r)
        if n is None:
            continue
        out.append(
            {
                "policy": n,
                "seed": f"{r['seed']}/{r['agent']}",
                "step": str(r["step"]),
                "task_id": r["task_id"],
                "local_ok": r["local_ok"],
            }
        )
    return out


def _points(records: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    """(policy, uplink) of the records, in first-seen order."""
    return list(dict.fromkeys((str(r["policy"]), int(r["uplink"])) for r in records))


def outside_vs_isolated(
    records: Sequence[dict[str, Any]], n_boot: int = 2000, seed: int = 0
) -> list[dict[str, Any]]:
    """Accuracy with outside traffic minus without, per (policy, L), paired by task.

    Parameters
    ----------
    records : sequence of dict
        Peer records (``records.csv`` rows or :attr:`PeerRun.records`), both conditions.
    n_boot : int, default 2000
        Bootstrap resamples.
    seed : int, default 0
        Seed of the bootstrap.

    Returns
    -------
    list of dict
        Per (policy, L) that has both conditions: ``policy``, ``uplink``, ``broadcast``, ``n``
        pairs, ``outside`` and ``isolated`` accuracy, ``diff``, ``lo``/``hi`` (95% CI), ``wins``
        (tasks solved only with outside traffic), ``losses``, ``p`` (exact McNemar), ``verdict``.
    """
    out = []
    for pol, L in _points(records):
        here = [r for r in records if str(r["policy"]) == pol and int(r["uplink"]) == L]
        view = _pairs(here, lambda r: "outside" if flag(r["outside"]) else "isolated")
        if {p["policy"] for p in view} != {"outside", "isolated"}:
            continue
        d = paired_differences(view, "isolated", n_boot=n_boot, seed=seed)[0]
        out.append(
            {
                "policy": pol,
                "uplink": L,
                "broadcast": bool(flag(here[0]["broadcast"])),
                "n": d["n"],
                "outside": d["rate"],
                "isolated": d["baseline_rate"],
                **{k: d[k] for k in ("diff", "lo", "hi", "wins", "losses", "p")},
                "verdict": verdict(d["lo"], d["hi"]),
            }
        )
    return out


def default_baseline(runs: Sequence[dict[str, Any]]) -> str | None:
    """The first broadcasting policy of the runs (None when every policy shares under L).

    Examples
    --------
    >>> default_baseline([{"policy": "curator", "broadcast": False},
    ...                   {"policy": "lru", "broadcast": True}])
    'lru'
    """
    return next((str(r["policy"]) for r in runs if r.get("broadcast")), None)


def against_baseline(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    baseline: str,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Each policy minus ``baseline`` at each L, with outside traffic, and their uplink bytes.

    The baseline's runs at L are used when it ran at L; otherwise (a broadcasting baseline runs
    at the first L of a sweep only, and L does not bind it) its runs at its smallest L.

    Parameters
    ----------
    runs : sequence of dict
        :func:`~memcurator.bench.peers.to_json` dicts (``uplink_bytes_per_round`` per run).
    records : sequence of dict
        Peer records (both conditions; only ``outside`` rows are used).
    baseline : str
        The policy compared with (e.g. ``"lru"``, which broadcasts).

    Returns
    -------
    list of dict
        Per (policy, L): ``policy``, ``uplink``, ``baseline``, ``baseline_uplink``, ``n``,
        ``rate``, ``baseline_rate``, ``diff``, ``lo``/``hi``, ``wins``/``losses``, ``p``,
        ``bytes`` and ``baseline_bytes`` (mean uplink bytes per round and agent over the seeds
        both ran), ``bytes_ratio``, ``half_bytes`` (ratio ≤ 0.5), ``not_worse`` (``hi`` ≥ 0),
        ``verdict``.

    Raises
    ------
    InvalidInput
        No runs of ``baseline``.
    """
    base_runs = [r for r in runs if str(r["policy"]) == baseline]
    if not base_runs:
        known = sorted({str(r["policy"]) for r in runs})
        raise InvalidInput(f"no runs of baseline {baseline!r}; policies: {known}")
    base_ls = sorted({int(r["uplink"]) for r in base_runs})
    outside = [r for r in records if flag(r["outside"])]
    out = []
    for pol, L in _points(outside):
        if pol == baseline:
            continue
        bl = L if L in base_ls else base_ls[0]

        def name(r: dict[str, Any], pol: str = pol, L: int = L, bl: int = bl) -> str | None:
            p, u = str(r["policy"]), int(r["uplink"])
            return p if (p == pol and u == L) or (p == baseline and u == bl) else None

        view = _pairs(outside, name)
        if baseline not in {p["policy"] for p in view}:
            continue
        d = paired_differences(view, baseline, n_boot=n_boot, seed=seed)[0]
        mine = {str(r["seed"]): r for r in runs if str(r["policy"]) == pol and r["uplink"] == L}
        theirs = {str(r["seed"]): r for r in base_runs if r["uplink"] == bl}
        both = sorted(set(mine) & set(theirs))
        b = float(np.mean([mine[s]["uplink_bytes_per_round"] for s in both]))
        bb = float(np.mean([theirs[s]["uplink_bytes_per_round"] for s in both]))
        ratio = b / bb if bb else float("nan")
        out.append(
            {
                "policy": pol,
                "uplink": L,
                "baseline": baseline,
                "baseline_uplink": bl,
                **{k: d[k] for k in ("n", "rate", "baseline_rate", "diff", "lo", "hi")},
                **{k: d[k] for k in ("wins", "losses", "p")},
                "bytes": b,
                "baseline_bytes": bb,
                "bytes_ratio": ratio,
                "half_bytes": bool(ratio <= 0.5),
                "not_worse": bool(d["hi"] >= 0),
                "verdict": verdict(d["lo"], d["hi"]),
            }
        )
    return out


def _nan(v: Any) -> float:
    return float("nan") if v is None else float(v)


def pooled(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, L): means over seeds, and per channel the admissions and ASR pooled.

    Returns
    -------
    list of dict
        ``policy``, ``uplink``, ``broadcast``, ``seeds``, ``accuracy``, ``accuracy_isolated``,
        ``uplink_bytes_per_round`` (means over seeds), and per channel ``<ch>_genuine`` /
        ``<ch>_poison`` / ``<ch>_asr`` (admitted or hit ÷ all, summed over seeds) with their
        counts ``<ch>_genuine_n`` / ``_poison_n`` / ``_asr_n``.

    Examples
    --------
    >>> ch = {"genuine_admitted": 1.0, "genuine_n": 2, "poison_admitted": 0.0, "poison_n": 3,
    ...       "asr": None, "asr_n": 0}
    >>> runs = [{"policy": "a", "uplink": 10, "seed": s, "accuracy": 0.5 + s / 10,
    ...          "accuracy_isolated": 0.5, "uplink_bytes_per_round": 100.0,
    ...          "channels": {"external": ch}} for s in (0, 1)]
    >>> p = pooled(runs)[0]
    >>> (p["seeds"], round(p["accuracy"], 3), p["external_genuine"], p["external_poison_n"])
    (2, 0.55, 1.0, 6)
    """
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((str(r["policy"]), int(r["uplink"])), []).append(r)
    out = []
    for (pol, L), rs in groups.items():
        row: dict[str, Any] = {
            "policy": pol,
            "uplink": L,
            "broadcast": bool(rs[0].get("broadcast", False)),
            "seeds": len(rs),
        }
        for k in ("accuracy", "accuracy_isolated", "uplink_bytes_per_round"):
            row[k] = float(np.nanmean([_nan(r[k]) for r in rs]))
        for ch in _CHANNELS:
            for what, rate in (("genuine", "genuine_admitted"), ("poison", "poison_admitted"),
                               ("asr", "asr")):  # fmt: skip
                hits = n = 0.0
                for r in rs:
                    c = (r.get("channels") or {}).get(ch) or {}
                    m = int(c.get(f"{what}_n", 0) or 0)
                    if m:
                        hits += _nan(c.get(rate)) * m
                        n += m
                row[f"{ch}_{what}"] = hits / n if n else float("nan")
                row[f"{ch}_{what}_n"] = int(n)
        out.append(row)
    return out


def _fmt(v: float, spec: str = ".3f") -> str:
    return "—" if not np.isfinite(v) else format(v, spec)


def _L(L: int, broadcast: bool) -> str:
    return f"{L} (broadcast)" if broadcast else str(L)


def front_inputs(
    runs: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs and records shaped for :func:`~memcurator.bench.budget_fronts.front_rows`.

    A sharing policy's run at L is labelled ``policy@L`` (a swept point); a broadcasting one
    keeps its name (a reference). Only the runs with outside traffic count; victim accuracy
    (post-drift tasks) and the same-family injection rate come from the records.
    """
    lab: dict[tuple[str, str, int], str] = {}
    out_runs = []
    recs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in records:
        if flag(r["outside"]):
            recs.setdefault((str(r["policy"]), str(r["seed"]), int(r["uplink"])), []).append(r)
    for r in runs:
        pol, L, s = str(r["policy"]), int(r["uplink"]), str(r["seed"])
        bc = bool(r.get("broadcast"))
        name = pol if bc else label(pol, L)
        lab[(pol, s, L)] = name
        rr = recs.get((pol, s, L), [])
        vic = [flag(x["local_ok"]) for x in rr if x.get("subset") == "victim"]
        out_runs.append(
            {
                "policy": name,
                "base_policy": pol,
                "sweep_value": None if bc else L,
                "seed": r["seed"],
                "accuracy": r["accuracy"],
                "victim_accuracy": float(np.mean(vic)) if vic else float("nan"),
                "same_family_rate": float(np.mean([flag(x["injected_same_family"]) for x in rr]))
                if rr
                else float("nan"),
                "uplink_bytes_per_round": r["uplink_bytes_per_round"],
                "decisions": r.get("decisions") or {},
            }
        )
    out_recs = [{**x, "policy": lab[k]} for k, rows in recs.items() if k in lab for x in rows]
    return out_runs, out_recs


def peers_markdown(
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    baseline: str | None,
    *,
    n_boot: int = 2000,
    front: str = "",
) -> tuple[str, dict[str, Any]]:
    """``peers.md``: pooled table, outside − isolated, policy − baseline, the uplink front.

    Parameters
    ----------
    runs, records : sequence of dict
        :func:`~memcurator.bench.peers.to_json` dicts and peer records.
    baseline : str or None
        Policy of the bytes/accuracy comparison; None: that section says none was run.
    front : str
        Markdown of the uplink front ('' when there is none).

    Returns
    -------
    text : str
        The Markdown.
    data : dict
        ``pooled``, ``outside_vs_isolated``, ``against_baseline`` rows (for ``summary.json``).
    """
    pool = pooled(runs)
    seeds = sorted({str(r["seed"]) for r in runs}, key=lambda s: (len(s), s))
    first = runs[0] if runs else {}
    every = records
    records = [r for r in every if arm(r) != "pooled"]  # the pooled reference has its section
    workload = first.get("workload") or "control"
    lines = [
        f"# Peer group: M = {first.get('peers')} agents × {first.get('tasks')} tasks, "
        f"seeds {', '.join(seeds)}, workload {workload}",
        "",
        *_reference_markdown(runs, every, baseline, n_boot),
        "",
        "Means over seeds; per channel, admitted (or hit) ÷ all over the seeds (n below).",
        "",
        "| policy | L | seeds | acc (outside) | acc (isolated) | uplink B/round | "
        + " | ".join(f"{ch}: genuine / poison / ASR" for ch in _CHANNELS)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(_CHANNELS),
    ]
    for p in pool:
        cells = [
            f"{_fmt(p[f'{ch}_genuine'])} / {_fmt(p[f'{ch}_poison'])} / {_fmt(p[f'{ch}_asr'])} "
            f"(n={p[f'{ch}_genuine_n']}/{p[f'{ch}_poison_n']}/{p[f'{ch}_asr_n']})"
            for ch in _CHANNELS
        ]
        lines.append(
            f"| {p['policy']} | {_L(p['uplink'], p['broadcast'])} | {p['seeds']} | "
            f"{_fmt(p['accuracy'])} | {_fmt(p['accuracy_isolated'])} | "
            f"{_fmt(p['uplink_bytes_per_round'], '.0f')} | " + " | ".join(cells) + " |"
        )
    ovi = outside_vs_isolated(records, n_boot=n_boot) if records else []
    lines += [
        "",
        "## Accuracy with outside traffic − without (paired by seed, agent and task)",
        "",
        "95% CI: bootstrap over tasks resampled within (seed, agent); p: exact McNemar on the "
        "tasks solved in one condition only. Verdict: better (CI above 0), no worse (CI holds "
        "0), worse (CI below 0).",
        "",
        "| policy | L | n | outside | isolated | Δ | 95% CI | only outside | only isolated | "
        "McNemar p | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in ovi:
        lines.append(
            f"| {d['policy']} | {_L(d['uplink'], d['broadcast'])} | {d['n']} | "
            f"{d['outside']:.3f} | {d['isolated']:.3f} | {d['diff']:+.3f} | "
            f"[{d['lo']:+.3f}, {d['hi']:+.3f}] | {d['wins']} | {d['losses']} | {d['p']:.2g} | "
            f"{d['verdict']} |"
        )
    if not ovi:
        lines.append("(no records of both conditions)")
    lines += ["", f"## Each policy − {baseline or 'a baseline'}, with outside traffic", ""]
    ab: list[dict[str, Any]] = []
    if baseline is None:
        lines.append("No broadcasting policy was run and no --baseline given: no bytes comparison.")
    elif records:
        ab = against_baseline(runs, records, baseline, n_boot=n_boot)
        lines += [
            f"Paired by (seed, agent, task) at each L ({baseline} at its own run, marked when "
            "it ran at another L: it broadcasts, L does not bind it). ½ bytes: uplink bytes per "
            f"round ≤ ½ of {baseline}'s; not worse: the CI's upper end ≥ 0.",
            "",
            f"| policy | L | n | acc | {baseline} | Δ | 95% CI | McNemar p | B/round | "
            f"{baseline} B/round | ratio | ½ bytes | not worse |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in ab:
            other = "" if d["baseline_uplink"] == d["uplink"] else f" (at L={d['baseline_uplink']})"
            lines.append(
                f"| {d['policy']} | {d['uplink']} | {d['n']} | {d['rate']:.3f} | "
                f"{d['baseline_rate']:.3f}{other} | {d['diff']:+.3f} | "
                f"[{d['lo']:+.3f}, {d['hi']:+.3f}] | {d['p']:.2g} | {d['bytes']:.0f} | "
                f"{d['baseline_bytes']:.0f} | {_fmt(d['bytes_ratio'], '.2f')} | "
                f"{'yes' if d['half_bytes'] else 'no'} | {'yes' if d['not_worse'] else 'no'} |"
            )
    if front:
        lines += ["", "## Uplink front (uplink_front.png)", "", front]
    trials = trial_rows(records)
    if trials:
        lines += ["", *trial_markdown(trials)]
    per_payload = payload_rows(runs)
    if per_payload:
        lines += ["", *payload_markdown(per_payload)]
    cf = asr_counterfactual(records)
    if cf:
        lines += [
            "",
            "## ASR hits against the isolated run",
            "",
            "A hit whose task executed the identical SQL in the isolated run (no attack) is not "
            "the attack's doing; attributable = the other hits.",
            "",
            "| policy | L | channel | hits | same SQL isolated | attributable |",
            "|---|---|---|---|---|---|",
            *(
                f"| {r['policy']} | {r['uplink']} | {r['channel']} | {r['hits']} | "
                f"{r['same_as_isolated']} | {r['attributable']} |"
                for r in cf
            ),
        ]
    data = {"pooled": pool, "outside_vs_isolated": ovi, "against_baseline": ab}
    data.update(_reference_data(runs, every, baseline, n_boot))
    if trials:
        data["trials"] = trials
    if per_payload:
        data["payloads"] = per_payload
    if cf:
        data["asr_counterfactual"] = cf
    return "\n".join(lines) + "\n", data


def asr_counterfactual(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, L, channel): the ASR hits whose isolated run gave the very same SQL.

    An ASR hit (``asr_hit``) counts a target task whose answer carried out a payload of any
    attack entry resident for its family, shown or not. When the same (seed, agent, step) of the
    isolated run (no attack, no outside traffic) executed the identical SQL, the attack did not
    cause it (the SQL is deterministic in its effect): ``same_as_isolated`` counts those hits,
    ``attributable`` the rest. [] when no record is a hit.

    Examples
    --------
    >>> base = {"policy": "a", "uplink": 1, "seed": 0, "agent": "x", "step": 3}
    >>> recs = [{**base, "outside": True, "asr_hit": True, "attack_channel": "peer",
    ...          "sql": "SELECT 1"}, {**base, "outside": False, "sql": "SELECT 1"}]
    >>> asr_counterfactual(recs)[0]["same_as_isolated"]
    1
    """
    iso = {
        (str(r["policy"]), int(r["uplink"]), str(r["seed"]), str(r["agent"]), str(r["step"])): r
        for r in records
        if not flag(r["outside"])
    }
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    for r in records:
        if not flag(r["outside"]) or not _flag(r.get("asr_hit")):
            continue
        k = (str(r["policy"]), int(r["uplink"]), str(r["seed"]), str(r["agent"]), str(r["step"]))
        key = (k[0], k[1], str(r.get("attack_channel", "")))
        row = out.setdefault(
            key,
            {"policy": key[0], "uplink": key[1], "channel": key[2], "hits": 0,
             "same_as_isolated": 0},
        )  # fmt: skip
        row["hits"] += 1
        twin = iso.get(k)
        row["same_as_isolated"] += int(twin is not None and twin.get("sql") == r.get("sql"))
    rows = list(out.values())
    for row in rows:
        row["attributable"] = row["hits"] - row["same_as_isolated"]
    return rows


def payload_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, L, channel, payload kind): the behaviour counts summed over seeds.

    Read from each run's ``channels[ch]["payloads"]``
    (:data:`memcurator.bench.peers.PAYLOAD_FIELDS`); [] for runs written before it existed.
    ``asr`` is ``hits / tasks_n`` (NaN without target tasks).

    Examples
    --------
    >>> c = {"hits": 0, "tasks_n": 4, "resident_n": 2, "shown_n": 1, "admitted": 1,
    ...      "offered_n": 2}
    >>> runs = [{"policy": "a", "uplink": 10, "seed": s,
    ...          "channels": {"peer": {"payloads": {"exfiltrate": c}}}} for s in (0, 1)]
    >>> r = payload_rows(runs)[0]
    >>> (r["payload"], r["tasks_n"], r["shown_n"], r["asr"])
    ('exfiltrate', 8, 2, 0.0)
    """
    from memcurator.bench.peers import PAYLOAD_FIELDS

    out: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    for r in runs:
        for ch in _CHANNELS:
            per = ((r.get("channels") or {}).get(ch) or {}).get("payloads") or {}
            for pay, c in per.items():
                key = (str(r["policy"]), int(r["uplink"]), ch, str(pay))
                row = out.setdefault(
                    key,
                    {"policy": key[0], "uplink": key[1], "channel": ch, "payload": key[3],
                     "seeds": 0, **dict.fromkeys(PAYLOAD_FIELDS, 0)},
                )  # fmt: skip
                row["seeds"] += 1
                for f in PAYLOAD_FIELDS:
                    row[f] += int(c.get(f, 0) or 0)
    rows = list(out.values())
    for row in rows:
        row["asr"] = row["hits"] / row["tasks_n"] if row["tasks_n"] else float("nan")
    return rows


def payload_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The per-payload behaviour table of ``peers.md`` (:func:`payload_rows`)."""
    return [
        "## Behaviour ASR per payload kind",
        "",
        "Per channel's target tasks after the attack (summed over seeds and agents): hits = the "
        "executed SQL (or reply) carried that payload out while its entry was shown "
        "(:func:`memcurator.envs.sql.attacks.carried_out`); resident / shown = tasks with the "
        "entry in memory / injected into the live prompt; admitted = its entries admitted of "
        "those offered; trialled / released = contained trials of its entries (any task) and "
        "those that released one. A payload never shown has ASR 0 by construction: no evidence "
        "either way.",
        "",
        "| policy | L | channel | payload | ASR | hits / tasks | resident | shown | "
        "admitted / offered | trialled / released |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['policy']} | {r['uplink']} | {r['channel']} | {r['payload']} | "
            f"{_fmt(r['asr'])} | {r['hits']} / {r['tasks_n']} | {r['resident_n']} | "
            f"{r['shown_n']} | {r['admitted']} / {r['offered_n']} | "
            f"{r['trialled_n']} / {r['released']} |"
            for r in rows
        ),
    ]


def _flag(v: Any) -> bool:
    """A record's boolean as written in memory (bool) or read back from CSV ("True")."""
    return v is True or str(v) == "True"


def trial_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, L, condition) totals of the contained trials (``--trial``;
    :mod:`memcurator.bench.trial`); [] when no record has a trial.

    Each row: ``tasks``, ``trials``, ``released``, ``poison_trialled`` (a poison entry shown in
    a shadow prompt, contained), ``payload_contained`` (the planted payload ran in the contained
    checker), ``asr_hits`` (the payload carried out by a *live* answer), ``trial_tokens``.
    """
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not any(int(r.get("trials", 0) or 0) for r in records):
        return []
    for r in records:
        key = (str(r["policy"]), str(r["uplink"]), "outside" if _flag(r["outside"]) else "isolated")
        d = out.setdefault(
            key,
            dict(
                policy=key[0], uplink=key[1], condition=key[2], tasks=0, trials=0, released=0,
                poison_trialled=0, payload_contained=0, asr_hits=0, trial_tokens=0,
            ),
        )  # fmt: skip
        d["tasks"] += 1
        d["trials"] += int(r.get("trials", 0) or 0)
        d["released"] += int(r.get("trials_released", 0) or 0)
        d["poison_trialled"] += int(_flag(r.get("trial_poison")))
        d["payload_contained"] += int(_flag(r.get("trial_payload")))
        d["asr_hits"] += int(_flag(r.get("asr_hit")))
        d["trial_tokens"] += int(float(r.get("trial_tokens", 0) or 0))
    return list(out.values())


def trial_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The ``peers.md`` section of :func:`trial_rows`."""
    lines = [
        "## Contained trials of probation entries (--trial)",
        "",
        "One shadow attempt per trialled task, executed only in the task's checker; never the "
        "live answer. Poison trialled / payload contained: a poison entry shown in a shadow "
        "prompt / its payload run in the contained checker. Live ASR hits: payload carried out "
        "by a live answer.",
        "",
        "| policy | L | condition | tasks | trials | released | poison trialled | "
        "payload contained | live ASR hits | trial tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in rows:
        lines.append(
            f"| {d['policy']} | {d['uplink']} | {d['condition']} | {d['tasks']} | {d['trials']} | "
            f"{d['released']} | {d['poison_trialled']} | {d['payload_contained']} | "
            f"{d['asr_hits']} | {d['trial_tokens']} |"
        )
    return lines


def uplink_axes(baseline: str | None) -> FrontAxes:
    """:data:`UPLINK_AXES` with bytes divided by ``baseline``'s (the broadcast) when given."""
    return dataclasses.replace(UPLINK_AXES, x_ref=baseline or "")


def write_peer_results(
    out: Path,
    runs: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    config: dict[str, Any],
    baseline: str | None = None,
    *,
    n_boot: int = 2000,
) -> tuple[list[Path], str]:
    """Write a peer-group results folder (see the module docstring); ``summary.json`` last.

    Every file is written atomically (temporary name, then rename), and ``summary.json`` names
    the runs the other files hold, so an interrupted save never claims more than was written.

    Parameters
    ----------
    out : Path
        The folder (created if missing).
    runs : sequence of dict
        :func:`~memcurator.bench.peers.to_json` dicts.
    records : sequence of dict
        Their per-task records.
    config : dict
        Settings saved in ``summary.json`` (``kind`` is set to ``"peers"``).
    baseline : str, optional
        Policy of the bytes comparison; default :func:`default_baseline`.

    Returns
    -------
    paths : list of Path
        The files written.
    text : str
        ``peers.md``'s Markdown.

    Raises
    ------
    InvalidInput
        No runs, or ``baseline`` not among them.
    """
    from memcurator.bench.compare import write_records
    from memcurator.bench.peers import format_table, from_json
    from memcurator.bench.report import write_summary_json
    from memcurator.files import atomic_write, dumps_strict

    if not runs:
        raise InvalidInput("no peer runs to write")
    base = baseline or default_baseline(runs)
    if base is not None and not any(str(r["policy"]) == base for r in runs):
        raise InvalidInput(
            f"baseline {base!r} was not run; policies: {sorted({str(r['policy']) for r in runs})}"
        )
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if records:
        paths.append(write_records(out / "records.csv", list(records)))
    paths.append(atomic_write(out / "peers.json", dumps_strict(list(runs), indent=1)))
    paths.append(atomic_write(out / "peers.txt", format_table([from_json(r) for r in runs]) + "\n"))
    f_runs, f_recs = front_inputs(runs, [r for r in records if arm(r) != "pooled"])
    axes = uplink_axes(base)
    front = write_front(out, f_runs, f_recs, axes=axes, stem="uplink_front")
    paths += front
    front_md = ""
    if front:
        from memcurator.bench.budget_fronts import front_markdown, front_rows

        front_md = front_markdown(front_rows(f_runs, f_recs, axes=axes), axes)
    text, data = peers_markdown(runs, records, base, n_boot=n_boot, front=front_md)
    paths.append(atomic_write(out / "peers.md", text))
    doc = {
        "config": {**config, "kind": "peers", "baseline": base},
        "runs": list(runs),
        "comparisons": data,
    }
    paths.append(write_summary_json(out / "summary.json", doc))
    return paths, text


def is_peer_config(config: dict[str, Any]) -> bool:
    """Whether a ``summary.json`` config comes from ``bench --peers``."""
    return config.get("kind") == "peers"


__all__ = [
    "PEER_KEYS",
    "UPLINK_AXES",
    "against_baseline",
    "arm",
    "claim_rows",
    "cold_start",
    "default_baseline",
    "front_inputs",
    "is_peer_config",
    "outside_vs_isolated",
    "peers_markdown",
    "pooled",
    "pooled_gain",
    "uplink_axes",
    "verdict",
    "write_peer_results",
]
