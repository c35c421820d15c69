"""Merge the result folders of ``memcurator bench`` into one set of runs, and write it.

A results folder holds ``summary.json`` (the settings under ``config``, one metrics dict per
finished (policy, seed) run under ``runs``) and ``records.csv`` (one row per task). Folders of one
configuration (e.g. one per seed, or a rerun of one policy) merge into one summary:
:func:`merge_folders` checks that they agree on the settings that change a result
(:data:`RUN_KEYS`), lets a later folder's run of a (policy, seed) replace an earlier one's, and
says which folders are partial (an interrupted bench). :func:`write_merged` writes the merged
folder. ``memcurator report`` is these two calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput

#: bench settings that must agree for runs to be merged, compared or resumed
RUN_KEYS = (
    "env",
    "tasks",
    "max_bytes",
    "poison",
    "payload",
    "poison_channel",
    "drift",
    "zipf",
    "families",
    "dml_share",
    "drift_popular",
    "os_variants",
    "inject_chars",
    "executor",
    "pool",
    "curator_learning",
    "vector_dtype",
    "compress_text",
    "trial",
)

#: settings a folder written before they existed ran at: compared as this value when missing
RUN_DEFAULTS: dict[str, object] = {
    "vector_dtype": "float32",
    "compress_text": False,
    "env": "sql",
    "trial": False,
    "os_variants": False,
    "payloads": "classic",
}


def _norm(key: str, v: object) -> object:
    # the thread count does not change a greedy completion's text
    if key == "executor" and isinstance(v, str):
        return re.sub(r"n_threads=[^,)]*, ?", "", v)
    return v


def config_clash(
    configs: Sequence[tuple[Path | str, dict[str, Any]]], keys: tuple[str, ...] = RUN_KEYS
) -> str:
    """'' if all folders agree on the settings ``keys``, else a description of the first clash.

    A key missing from a folder's config is compared as its :data:`RUN_DEFAULTS` value when it
    has one (folders written before the setting existed ran at that value), else skipped. The
    executor's thread count is ignored.

    Parameters
    ----------
    configs : list of (folder, config dict)
        ``config`` of each folder's ``summary.json``.
    keys : tuple of str, default :data:`RUN_KEYS`

    Returns
    -------
    str
        ``"<key>: <value> in <folder>, <value> in <folder>"`` for the first key that differs.

    Examples
    --------
    >>> config_clash([("a", {"tasks": 50}), ("b", {"tasks": 50})])
    ''
    >>> config_clash([("a", {"tasks": 50}), ("b", {"tasks": 60})])
    'tasks: 50 in a, 60 in b'
    >>> config_clash([("a", {"vector_dtype": "int8"}), ("b", {})])
    "vector_dtype: 'int8' in a, 'float32' in b"
    """
    for key in keys:
        seen: dict[str, str] = {}
        for f, cfg in configs:
            if key in cfg or key in RUN_DEFAULTS:
                seen.setdefault(repr(_norm(key, cfg.get(key, RUN_DEFAULTS.get(key)))), str(f))
        if len(seen) > 1:
            return f"{key}: " + ", ".join(f"{v} in {f}" for v, f in seen.items())
    return ""


@dataclass
class MergedResults:
    """The runs of several result folders, merged.

    Attributes
    ----------
    folders : list of Path
        The merged folders, in the order given (a later one's run wins).
    kind : {"single", "peers"}
        Single-agent folders, or peer-group folders (``bench --peers``).
    runs : list of dict
        One metrics dict per run: per (policy, seed), or per (policy, seed, uplink) for peers.
    summary : list of dict
        Mean and sd over seeds per policy (:func:`memcurator.bench.report.summarize`); empty for
        peer-group folders, whose tables come from :mod:`memcurator.bench.peer_report`.
    config : dict
        The settings the folders share (:data:`RUN_KEYS`, or the peer keys), plus ``merged``
        (the folders) and ``complete`` (no folder partial).
    partial : list of str
        ``"<folder> (<n> runs finished)"`` for each folder of an interrupted bench.
    records : list of dict
        The per-task rows of ``records.csv`` (strings as written, a later folder's run wins);
        empty when a folder has none.
    baseline : str or None
        Peer groups: the baseline policy the first folder that names one was run with.
    """

    folders: list[Path]
    kind: str
    runs: list[dict[str, Any]]
    summary: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    partial: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    baseline: str | None = None


def merge_folders(folders: list[Path]) -> MergedResults:
    """Read, check and merge the results folders ``folders``.

    Parameters
    ----------
    folders : list of Path
        Folders written by ``memcurator bench`` or ``memcurator report --out``; all single-agent
        or all peer-group folders.

    Returns
    -------
    MergedResults

    Raises
    ------
    InvalidInput
        No folder given; a folder or its ``summary.json`` is missing or unreadable; peer-group
        and single-agent folders mixed; the folders were run with different settings or hold
        streams of different lengths; they hold no runs; their ``records.csv`` is unreadable, or
        (peer groups) names other runs than their summaries.

    Examples
    --------
    >>> merge_folders([])
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: no results folder to merge
    """
    from memcurator.bench.peer_report import is_peer_config
    from memcurator.bench.report import read_summary

    if not folders:
        raise InvalidInput("no results folder to merge")
    folders = [Path(f) for f in folders]
    docs = [read_summary(f) for f in folders]
    kinds = [is_peer_config(d["config"]) for d in docs]
    if any(kinds) and not all(kinds):
        peer = [str(f) for f, k in zip(folders, kinds, strict=True) if k]
        single = [str(f) for f, k in zip(folders, kinds, strict=True) if not k]
        raise InvalidInput(
            f"cannot merge peer-group folders ({', '.join(peer)}) with single-agent "
            f"folders ({', '.join(single)}); report each kind on its own"
        )
    if all(kinds):
        return _merge_peers(folders, docs)
    return _merge_single(folders, docs)


def _partial(folders: list[Path], docs: list[dict[str, Any]]) -> list[str]:
    return [
        f"{f} ({d['config'].get('runs_done')} runs finished)"
        for f, d in zip(folders, docs, strict=True)
        if d["config"].get("complete") is False
    ]


def _merge_single(folders: list[Path], docs: list[dict[str, Any]]) -> MergedResults:
    from memcurator.bench.compare import read_records
    from memcurator.bench.report import summarize

    configs = [(f, d["config"]) for f, d in zip(folders, docs, strict=True)]
    runs = [r for d in docs for r in d["runs"]]
    if not runs:
        raise InvalidInput(f"no runs in {[str(f) for f in folders]}")
    clash = config_clash(configs)
    if clash:
        raise InvalidInput(
            f"the folders were run with different settings ({clash}); merge runs of one "
            "configuration only"
        )
    lengths = sorted({int(r["tasks"]) for r in runs})
    if len(lengths) > 1:
        raise InvalidInput(
            f"the folders hold streams of different lengths {lengths} tasks; merge runs of one "
            "configuration only"
        )
    # a later folder's run of the same (policy, seed) replaces an earlier one (a rerun)
    latest = {(r["policy"], r["seed"]): r for r in runs}
    runs = list(latest.values())
    partial = _partial(folders, docs)
    try:
        have = all((f / "records.csv").exists() for f in folders)
        records = read_records(folders) if have else []
    except FileNotFoundError as e:  # removed between the check and the read
        raise InvalidInput(str(e)) from None
    common = {k: v for k, v in configs[0][1].items() if k in RUN_KEYS}
    return MergedResults(
        folders=folders,
        kind="single",
        runs=runs,
        summary=summarize(runs),
        config={**common, "merged": [str(f) for f in folders], "complete": not partial},
        partial=partial,
        records=records,
    )


def _merge_peers(folders: list[Path], docs: list[dict[str, Any]]) -> MergedResults:
    from memcurator.bench.compare import read_records
    from memcurator.bench.peer_report import PEER_KEYS

    configs = [(f, d["config"]) for f, d in zip(folders, docs, strict=True)]
    clash = config_clash(configs, PEER_KEYS)
    if clash:
        raise InvalidInput(
            f"the peer-group folders were run with different settings ({clash}); merge runs of "
            "one configuration only"
        )
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for d in docs:
        for r in d["runs"]:
            latest[(str(r["policy"]), str(r["seed"]), str(r.get("uplink")))] = r
    have = all((f / "records.csv").exists() for f in folders)
    records = read_records(folders, key=("policy", "seed", "uplink")) if have else []
    # a (policy, seed, uplink) whose summary came from another folder than its records
    keys = {(str(r["policy"]), str(r["seed"]), str(r["uplink"])) for r in records}
    if records and keys != set(latest):
        raise InvalidInput(
            "records.csv and summary.json of the folders name different runs "
            f"({len(keys)} vs {len(latest)}); rerun the incomplete folder"
        )
    partial = [str(f) for f, c in configs if c.get("complete") is False]
    base = next((c.get("baseline") for _, c in configs if c.get("baseline")), None)
    config = {
        **{k: v for k, v in configs[0][1].items() if k in PEER_KEYS},
        "kind": "peers",
        "merged": [str(f) for f in folders],
        "complete": not partial,
    }
    return MergedResults(
        folders=folders,
        kind="peers",
        runs=list(latest.values()),
        config=config,
        partial=partial,
        records=records,
        baseline=base,
    )


def write_merged(out: Path, merged: MergedResults) -> list[Path]:
    """Write a merged single-agent folder: summary.json/.md, records.csv, plots, fronts.

    Parameters
    ----------
    out : Path
        The folder to write (created; files in it are replaced). The caller holds its lock.
    merged : MergedResults
        From :func:`merge_folders`, of kind ``"single"``.

    Returns
    -------
    list of Path
        The files written. The plots are left out when matplotlib is not installed.

    Raises
    ------
    InvalidInput
        ``out`` is one of the merged folders, or ``merged`` holds peer-group runs (written by
        :func:`memcurator.bench.peer_report.write_peer_results`).
    """
    from memcurator.bench.budget_fronts import write_front
    from memcurator.bench.compare import write_records
    from memcurator.bench.report import markdown, plot, plot_over_time, write_summary_json
    from memcurator.files import atomic_write

    check_out(out, merged.folders)
    if merged.kind != "single":
        raise InvalidInput("write_merged writes single-agent folders; peer groups have their own")
    out.mkdir(parents=True, exist_ok=True)
    written = [
        write_summary_json(
            out / "summary.json",
            {
                "merged": merged.config["merged"],
                "config": {k: v for k, v in merged.config.items() if k != "merged"},
                "summary": merged.summary,
                "runs": merged.runs,
            },
        ),
        atomic_write(out / "summary.md", markdown(merged.summary) + "\n"),
    ]
    if merged.records:
        written.append(write_records(out / "records.csv", merged.records))
    try:
        written.append(plot(out / "accuracy_vs_bytes.png", merged.summary))
        if merged.records:
            written.append(plot_over_time(out / "accuracy_over_time.png", merged.records))
        from memcurator.bench.fronts import has_sweep, plot_fronts

        if has_sweep(merged.summary) and any("cost_per_task" in r for r in merged.summary):
            written.append(plot_fronts(out / "fronts.png", merged.summary))
    except ImportError:  # matplotlib is an optional extra: the tables are written without it
        pass
    written += write_front(out, merged.runs, merged.records)
    return written


def check_out(out: Path, folders: list[Path]) -> None:
    """Refuse an output folder that is one of the merged ``folders``.

    Raises
    ------
    InvalidInput
        ``out`` resolves to one of ``folders``.

    Examples
    --------
    >>> check_out(Path("m"), [Path("a"), Path("./m")])
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: --out 'm' is one of the merged folders; choose another
    """
    if any(Path(f).resolve() == Path(out).resolve() for f in folders):
        raise InvalidInput(f"--out {str(out)!r} is one of the merged folders; choose another")


def compare_folders(
    folders: Sequence[Path],
    baseline: str,
    *,
    outcome: str = "local_ok",
    subset: str | None = None,
    n_boot: int = 2000,
) -> list[dict[str, Any]]:
    """:func:`~memcurator.bench.compare.paired_differences` of the records of result folders
    run with one configuration.

    Folders with a ``summary.json`` must agree on the run settings
    (:data:`memcurator.bench.results.RUN_KEYS`); a folder of ``records.csv`` alone is paired
    as it is (the per-task ids are still checked).

    Raises
    ------
    InvalidInput
        The folders were run with different settings, a folder lacks ``records.csv`` or its
        ``summary.json`` is unreadable, or :func:`paired_differences` refuses.
    """
    from memcurator.bench.compare import paired_differences, read_records
    from memcurator.bench.report import read_summary

    configs = [(f, read_summary(f)["config"]) for f in folders if (f / "summary.json").exists()]
    clash = config_clash(configs)
    if clash:
        raise InvalidInput(f"the folders were run with different settings ({clash})")
    try:
        records = read_records(folders)
    except FileNotFoundError as e:
        raise InvalidInput(str(e)) from None
    return paired_differences(records, baseline, outcome=outcome, subset=subset, n_boot=n_boot)


__all__ = [
    "RUN_DEFAULTS",
    "RUN_KEYS",
    "MergedResults",
    "check_out",
    "compare_folders",
    "config_clash",
    "merge_folders",
    "write_merged",
]
