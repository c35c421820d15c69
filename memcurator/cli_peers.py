"""The peer-group halves of ``memcurator bench --peers`` and ``memcurator report``.

Kept out of ``cli.py`` so that the commands there stay short; both write a folder through
:func:`memcurator.bench.peer_report.write_peer_results`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from memcurator.cli_results import fail, interrupted_message, lock_results, sigint_deferred
from memcurator.errors import MemcuratorError

console = Console(stderr=True)


def bench_peers(
    cfg: Any,
    fams: list[Any],
    ex: Any,
    out_dir: Path,
    overwrite: bool,
    *,
    peers: int,
    share_every: int,
    uplink: str,
    outside_rate: float,
    families: int,
    baseline: str | None,
) -> None:
    """``bench --peers M``: every seed, policy and uplink budget; saved after each run.

    The folder is rewritten after every finished (policy, seed, uplink) run with
    ``complete: false`` in ``summary.json`` until the last, so an interrupted run keeps what it
    finished. Exits with code 2 on bad settings, 130 on Ctrl-C.
    """
    from memcurator.bench.peer_report import write_peer_results
    from memcurator.bench.peers import PeerConfig, PeerRun, format_table, run_peers, to_json
    from memcurator.policy import create_policy

    try:
        budgets = [int(x) for x in uplink.split(",") if x.strip()]
    except ValueError:
        fail(ValueError(f"--uplink must be integers separated by commas, got {uplink!r}"))
        return
    if not budgets or len(set(budgets)) != len(budgets) or min(budgets) < 0:
        fail(ValueError(f"--uplink needs distinct budgets >= 0 bytes, got {uplink!r}"))
    try:
        base_cfgs = [
            PeerConfig(
                peers=peers,
                n_tasks=cfg.stream.n_tasks,
                share_every=share_every,
                uplink=budgets[0],
                outside_rate=outside_rate,
                attack=cfg.stream.poison > 0,
                n_families=families,
                zipf=cfg.stream.zipf,
                drift=cfg.stream.drift,
                max_bytes=cfg.max_bytes,
                seed=seed,
                agent=cfg.agent,
                vector_dtype=cfg.vector_dtype,
            )
            for seed in cfg.seeds
        ]
        bcast = {p: not create_policy(p).can_share for p in cfg.policies}
    except MemcuratorError as e:
        fail(e)
        return
    if baseline is not None and baseline not in cfg.policies:
        fail(ValueError(f"--baseline {baseline!r} is not among --policies {list(cfg.policies)}"))
    n_runs = len(cfg.seeds) * sum(1 if b else len(budgets) for b in bcast.values())
    config = {
        "argv": sys.argv,
        "kind": "peers",
        "peers": peers,
        "tasks": cfg.stream.n_tasks,
        "seeds": len(cfg.seeds),
        "seed_start": cfg.seeds[0],
        "share_every": share_every,
        "uplink": budgets,
        "outside_rate": outside_rate,
        "attack": cfg.stream.poison > 0,
        "attack_at": base_cfgs[0].attack_at,
        "families": families,
        "zipf": cfg.stream.zipf,
        "drift": cfg.stream.drift,
        "max_bytes": cfg.max_bytes,
        "inject_chars": cfg.agent.inject_chars,
        "max_turns": cfg.agent.max_turns,
        "executor": repr(ex),
        "policies": list(cfg.policies),
        "vector_dtype": cfg.vector_dtype,
    }
    lock = lock_results(out_dir, overwrite)
    console.print(
        f"[bold]memcurator bench --peers {peers}[/bold]: {len(cfg.policies)} policies × "
        f"{len(cfg.seeds)} seeds × L in {budgets} ({n_runs} runs; broadcasting policies once per "
        f"seed), {cfg.stream.n_tasks} tasks per agent → {out_dir}"
    )
    runs: list[PeerRun] = []

    def save(done: list[PeerRun]) -> str:
        meta = {**config, "complete": len(done) == n_runs, "runs_done": len(done)}
        with sigint_deferred():  # a save is never cut in half by Ctrl-C
            _, text = write_peer_results(
                out_dir,
                to_json(done),
                [rec for r in done for rec in r.records],
                meta,
                baseline,
            )
        return text

    def finished(run: PeerRun) -> None:
        runs.append(run)
        save(runs)
        console.print(
            f"{run.policy} seed {run.seed} L={run.uplink}: accuracy {run.accuracy:.3f} "
            f"(isolated {run.accuracy_isolated:.3f}), {run.uplink_bytes_per_round:.0f} B/round "
            f"[{len(runs)}/{n_runs}]"
        )

    try:
        for pc in base_cfgs:
            cache: dict[str, Any] = {}
            run_peers(
                list(cfg.policies), fams, ex, pc, uplinks=budgets, on_run=finished, isolated=cache
            )
    except MemcuratorError as e:
        lock.release()
        fail(e)
        return
    except KeyboardInterrupt:
        console.print(interrupted_message(out_dir, n_runs, lock))
        raise typer.Exit(code=130) from None
    text = save(runs)
    lock.release()
    print(format_table(runs))
    print()
    print(text, end="")
    console.print(f"wrote {out_dir}: records.csv, peers.json, peers.txt, peers.md, summary.json")


def report_peers(
    folders: list[Path],
    docs: list[dict[str, Any]],
    out: Path | None,
    baseline: str | None,
    *,
    as_markdown: bool,
    as_json: bool,
) -> None:
    """``memcurator report`` on peer-group folders: merge runs and records, write the folder.

    A later folder's (policy, seed, uplink) run replaces an earlier one's. Prints the per-run
    table and ``peers.md`` (or only ``peers.md`` with ``--markdown``, the merged document with
    ``--json``).
    """
    from memcurator.bench.compare import read_records
    from memcurator.bench.peer_report import (
        PEER_KEYS,
        default_baseline,
        peers_markdown,
        write_peer_results,
    )
    from memcurator.bench.peers import format_table, from_json
    from memcurator.cli import _config_clash
    from memcurator.files import dumps_strict

    configs = [(f, d["config"]) for f, d in zip(folders, docs, strict=True)]
    clash = _config_clash(configs, PEER_KEYS)
    if clash:
        fail(
            ValueError(
                f"the peer-group folders were run with different settings ({clash}); merge runs "
                "of one configuration only"
            )
        )
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for d in docs:
        for r in d["runs"]:
            latest[(str(r["policy"]), str(r["seed"]), str(r.get("uplink")))] = r
    runs = list(latest.values())
    try:
        table = format_table([from_json(r) for r in runs])
        have = all((f / "records.csv").exists() for f in folders)
        records = read_records(folders, key=("policy", "seed", "uplink")) if have else []
        # a (policy, seed, uplink) whose summary came from another folder than its records
        keys = {(str(r["policy"]), str(r["seed"]), str(r["uplink"])) for r in records}
        if records and keys != set(latest):
            raise ValueError(
                "records.csv and summary.json of the folders name different runs "
                f"({len(keys)} vs {len(latest)}); rerun the incomplete folder"
            )
        partial = [str(f) for f, c in configs if c.get("complete") is False]
        base = baseline or next((c.get("baseline") for _, c in configs if c.get("baseline")), None)
        if base is not None and base not in {str(r["policy"]) for r in runs}:
            if baseline is not None:
                raise ValueError(f"--baseline {base!r} is not among the merged runs")
            base = None  # e.g. the folders of a job queue, one policy each: fall back below
        config = {
            **{k: v for k, v in configs[0][1].items() if k in PEER_KEYS},
            "kind": "peers",
            "merged": [str(f) for f in folders],
            "complete": not partial,
        }
        if out is not None:
            lock = lock_results(out, overwrite=True, what="memcurator report")
            paths, text = write_peer_results(out, runs, records, config, base)
            lock.release()
        else:
            text, _ = peers_markdown(runs, records, base or default_baseline(runs))
    except (MemcuratorError, ValueError, KeyError) as e:
        fail(e)
        return
    if as_json:
        print(dumps_strict({"config": config, "runs": runs}, indent=1))
    elif as_markdown:
        print(text, end="")
    else:
        print(table)
        print()
        print(text, end="")
    if partial:
        console.print("[yellow]partial folders (interrupted runs):[/yellow] " + "; ".join(partial))
    if out is not None:
        console.print("wrote " + ", ".join(str(p) for p in paths))


__all__ = ["bench_peers", "report_peers"]
