"""The peer-group halves of ``memcurator bench --peers`` and ``memcurator report``.

Kept out of ``cli.py`` so that the commands there stay short; both write a folder through
:func:`memcurator.bench.peer_report.write_peer_results`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from memcurator.cli_common import console, fail
from memcurator.cli_results import interrupted_message, lock_results, sigint_deferred
from memcurator.errors import MemcuratorError


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
    transport: str = "inproc",
    payloads: str = "classic",
    workload: str = "control",
    store: str = ":memory:",
    cross: float = 0.2,
    join_after: int | None = None,
) -> None:
    """``bench --peers M``: every seed, policy and uplink budget; saved after each run.

    The folder is rewritten after every finished (policy, seed, uplink) run with
    ``complete: false`` in ``summary.json`` until the last, so an interrupted run keeps what it
    finished. ``transport="http"``: the run with outside traffic runs each agent in its own
    process through a hub server (:mod:`memcurator.bench.hub_peers`). ``workload``, ``store``,
    ``cross`` and ``join_after`` are :class:`~memcurator.bench.peers.PeerConfig`'s; the pooled
    reference runs beside the isolated one. Exits with code 2 on bad settings, 130 on Ctrl-C.
    """
    from memcurator.bench.peer_report import write_peer_results
    from memcurator.bench.peers import PeerConfig, PeerRun, format_table, run_peers, to_json
    from memcurator.policy import create_policy

    budgets = _uplink_budgets(uplink)
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
                payloads=payloads,
                workload=workload,
                cross=cross,
                join_after=join_after,
                store=store,
            )
            for seed in cfg.seeds
        ]
        bcast = {p: not create_policy(p).can_share for p in cfg.policies}
    except MemcuratorError as e:
        fail(e)
    if baseline is not None and baseline not in cfg.policies:
        fail(ValueError(f"--baseline {baseline!r} is not among --policies {list(cfg.policies)}"))
    n_runs = len(cfg.seeds) * sum(1 if b else len(budgets) for b in bcast.values())
    config = _peer_settings(
        cfg, ex, base_cfgs[0].attack_at, peers=peers, share_every=share_every, budgets=budgets,
        outside_rate=outside_rate, families=families, transport=transport, payloads=payloads,
        workload=workload, cross=cross, join_after=base_cfgs[0].joins_at,
    )  # fmt: skip
    runner = None
    if transport == "http":
        from memcurator.bench.hub_peers import run_group_http
        from memcurator.service import require_extra

        try:
            require_extra()  # before any work: the hub is `memcurator serve`
        except MemcuratorError as e:
            fail(e)
        runner = run_group_http
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
        wire = ""
        if run.transport == "http":
            wire = (
                f" in process, {run.wire_bytes_per_round:.0f} B/round on the wire "
                f"(+{run.wire_header_bytes_per_round:.0f} B headers)"
            )
        console.print(
            f"{run.policy} seed {run.seed} L={run.uplink}: accuracy {run.accuracy:.3f} "
            f"(isolated {run.accuracy_isolated:.3f}, pooled {run.accuracy_pooled:.3f}), "
            f"{run.uplink_bytes_per_round:.0f} B/round"
            f"{wire} [{len(runs)}/{n_runs}]"
        )

    try:
        for pc in base_cfgs:
            cache: dict[str, Any] = {}
            run_peers(
                list(cfg.policies),
                fams,
                ex,
                pc,
                uplinks=budgets,
                on_run=finished,
                isolated=cache,
                group_runner=runner,
            )
    except MemcuratorError as e:
        lock.release()
        fail(e)
    except KeyboardInterrupt:
        console.print(interrupted_message(out_dir, n_runs, lock, resumable=False))
        raise typer.Exit(code=130) from None
    text = save(runs)
    lock.release()
    print(format_table(runs))
    print()
    print(text, end="")
    console.print(f"wrote {out_dir}: records.csv, peers.json, peers.txt, peers.md, summary.json")


def _uplink_budgets(uplink: str) -> list[int]:
    """``--uplink``'s comma list as distinct byte budgets >= 0; exits with code 2 otherwise."""
    try:
        budgets = [int(x) for x in uplink.split(",") if x.strip()]
    except ValueError:
        fail(f"--uplink must be integers separated by commas, got {uplink!r}")
    if not budgets or len(set(budgets)) != len(budgets) or min(budgets) < 0:
        fail(ValueError(f"--uplink needs distinct budgets >= 0 bytes, got {uplink!r}"))
    return budgets


def _peer_settings(
    cfg: Any,
    ex: Any,
    attack_at: Any,
    *,
    peers: int,
    share_every: int,
    budgets: list[int],
    outside_rate: float,
    families: int,
    transport: str,
    payloads: str,
    workload: str = "control",
    cross: float = 0.2,
    join_after: int = 0,
) -> dict[str, Any]:
    """The settings a peer-group results folder records in ``summary.json``."""
    return {
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
        "attack_at": attack_at,
        "families": families,
        "zipf": cfg.stream.zipf,
        "drift": cfg.stream.drift,
        "max_bytes": cfg.max_bytes,
        "inject_chars": cfg.agent.inject_chars,
        "max_turns": cfg.agent.max_turns,
        "trial": cfg.agent.trial,
        "executor": repr(ex),
        "policies": list(cfg.policies),
        "vector_dtype": cfg.vector_dtype,
        "transport": transport,
        "payloads": payloads,
        "workload": workload,
        "cross": cross,
        "join_after": join_after,
    }


def report_peers(
    merged: Any,
    out: Path | None,
    baseline: str | None,
    *,
    as_markdown: bool,
    as_json: bool,
) -> None:
    """``memcurator report`` on peer-group folders merged by
    :func:`memcurator.bench.results.merge_folders`: print the tables, write ``out``.

    Prints the per-run table and ``peers.md`` (or only ``peers.md`` with ``--markdown``, the
    merged document with ``--json``).
    """
    from memcurator.bench.peer_report import (
        default_baseline,
        peers_markdown,
        write_peer_results,
    )
    from memcurator.bench.peers import format_table, from_json
    from memcurator.files import dumps_strict

    runs = merged.runs
    try:
        table = format_table([from_json(r) for r in runs])
        base = baseline or merged.baseline
        if base is not None and base not in {str(r["policy"]) for r in runs}:
            if baseline is not None:
                raise ValueError(f"--baseline {base!r} is not among the merged runs")
            base = None  # e.g. the folders of a job queue, one policy each: fall back below
        if out is not None:
            lock = lock_results(out, overwrite=True, what="memcurator report")
            try:
                paths, text = write_peer_results(out, runs, merged.records, merged.config, base)
            finally:
                lock.release()
        else:
            text, _ = peers_markdown(runs, merged.records, base or default_baseline(runs))
    except (MemcuratorError, ValueError, KeyError) as e:
        fail(e)
    if as_json:
        print(dumps_strict({"config": merged.config, "runs": runs}, indent=1))
    elif as_markdown:
        print(text, end="")
    else:
        print(table)
        print()
        print(text, end="")
    if merged.partial:
        console.print(
            "[yellow]partial folders (interrupted runs):[/yellow] " + "; ".join(merged.partial)
        )
    if out is not None:
        console.print("wrote " + ", ".join(str(p) for p in paths))


__all__ = ["bench_peers", "report_peers"]
