"""``memcurator bench --ray``: a bench's (policy, seed, budget) runs as Ray tasks.

Each run of a bench is independent: a fresh in-memory store on the seed's stream, one preset,
one budget (:func:`memcurator.bench.runner.run_policy`). :func:`run_bench_ray` submits every run
not finished yet as one Ray task, collects them as they finish and hands the finished ones, in
the order a sequential bench lists them, to ``on_run`` (the results folder is rewritten after
each, as without Ray), so the folder holds the same records as a sequential bench (timing and
completion-cache columns aside) and an interrupted sweep resumes with ``--resume``.

* **Executor.** Each worker process builds its own executor from a factory (an open SQLite
  cache or a loaded GGUF model cannot be pickled) and keeps it for the next runs it gets.
* **Completion cache.** Workers on one machine share its SQLite file
  (:class:`memcurator.llm.CachedExecutor`: WAL, a busy timeout, ``INSERT OR IGNORE``, checked
  with several processes writing at once). Workers on other machines use their own machine's
  cache folder; nothing is merged between machines.
* **A worker that dies** (killed, out of memory, its node lost) has its run retried by Ray up to
  ``max_retries`` times; a run that still fails, or that raises, is left out, the other runs
  finish and are saved, and the error names the missing runs for ``--resume``.

References
----------
Moritz et al., "Ray: A Distributed Framework for Emerging AI Applications", OSDI 2018 (tasks,
lineage-based re-execution of a task whose worker died).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from memcurator.errors import MissingExtra, RunsFailed

if TYPE_CHECKING:
    from memcurator.bench.runner import BenchConfig, PolicyRun


#: Environment for a Ray started here: no usage statistics sent anywhere, no dashboard.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class RayOptions:
    """Where and how ``bench --ray`` runs its cells.

    Parameters
    ----------
    address : str or None
        A running Ray cluster (``ray://host:10001``, ``host:6379`` or ``auto``; its nodes need
        memcurator installed, and recent Ray versions its token in ``RAY_AUTH_TOKEN``); None
        starts a local Ray on this machine (loopback only, no dashboard) for the length of
        the bench. A Ray already initialised in this process is used as it is.
    executor : callable () -> executor
        Builds the LLM executor in a worker (e.g. ``functools.partial(make_executor, "gguf")``);
        called once per worker process and kept.
    max_retries : int, default 2
        Times Ray reruns a run whose worker died (a Python exception is not retried).
    init : dict
        Further ``ray.init`` arguments for a local Ray (``num_cpus``,
        ``object_store_memory`` in bytes, ...).
    cell : callable
        The function one task runs (:func:`run_cell`); a test may wrap it.
    """

    address: str | None
    executor: Callable[[], Any]
    max_retries: int = 2
    init: dict[str, Any] = field(default_factory=dict)
    cell: Callable[..., PolicyRun] | None = None


_EXECUTORS: dict[str, Any] = {}


def _executor(factory: Callable[[], Any]) -> Any:
    """This worker's executor from ``factory``, built on its first use and kept (keyed by the
    factory's ``repr``: a ``functools.partial`` names its function and arguments)."""
    key = repr(factory)
    if key not in _EXECUTORS:
        _EXECUTORS[key] = factory()
    return _EXECUTORS[key]


def run_cell(
    name: str,
    label: str,
    run_cfg: BenchConfig,
    sweep: tuple[str, int] | None,
    seed: int,
    stream_cfg: dict[str, Any],
    families: list[Any],
    executor: Callable[[], Any],
    presets: dict[str, Any],
) -> PolicyRun:
    """One (policy, seed, budget) run in a worker: the seed's stream, a fresh memory.

    ``presets`` are the policy specs registered in the driver (``--policy-file``,
    ``--preferences``); they are registered here too, as the worker is another process.
    """
    from memcurator.bench.runner import run_policy
    from memcurator.bench.stream import StreamConfig, build_stream
    from memcurator.policy.presets import PRESETS

    for k, v in presets.items():
        PRESETS.setdefault(k, v)
    stream = build_stream(StreamConfig(**{**stream_cfg, "seed": seed}), families)
    return run_policy(name, stream, _executor(executor), run_cfg, seed, label=label, sweep=sweep)


def _call(cell: Callable[..., PolicyRun], *args: Any) -> PolicyRun:
    """The Ray task: ``cell(*args)`` (a plain function, so ``cell`` may be any callable)."""
    return cell(*args)


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise MissingExtra("bench --ray needs Ray: pip install 'memcurator[ray]'") from e
    return ray


def run_bench_ray(
    cfg: BenchConfig,
    opts: RayOptions,
    *,
    families: list[Any],
    progress: Callable[[str, int], Callable[[], None]] | None = None,
    on_run: Callable[[list[PolicyRun]], None] | None = None,
    done: Sequence[PolicyRun] = (),
) -> list[PolicyRun]:
    """Every (policy, seed, budget) run of ``cfg`` not in ``done``, as Ray tasks.

    The Ray counterpart of :func:`memcurator.bench.runner.run_bench`: one :func:`run_cell`
    task per run, its executor built in the worker by ``opts.executor``.

    Parameters
    ----------
    cfg : BenchConfig
    opts : RayOptions
    families : list
        The task families (sent to the workers once, through Ray's object store).
    progress : callable, optional
        ``progress(label, n_tasks)`` is called when a run finishes (its tasks are ticked then).
    on_run : callable, optional
        Called with the finished runs, in sequential order, after each run finishes.
    done : sequence of PolicyRun
        Runs finished before (``--resume``); kept unchanged, not run again.

    Returns
    -------
    list of PolicyRun
        In the order :func:`memcurator.bench.runner.run_bench` returns them.

    Raises
    ------
    MissingExtra
        Ray is not installed.
    RunsFailed
        Some runs failed after their retries (listed); every other run finished and was
        handed to ``on_run``.
    """
    from memcurator.bench.runner import _plan
    from memcurator.policy.presets import PRESETS

    ray = _ray()
    plan = [(seed, *p) for seed in cfg.seeds for p in _plan(cfg)]
    finished = {(r.policy, r.seed): r for r in done}

    def ordered() -> list[PolicyRun]:
        return [finished[(lb, s)] for s, _, lb, _, _ in plan if (lb, s) in finished]

    todo = [c for c in plan if (c[2], c[0]) not in finished]
    if not todo:
        return ordered()
    started = False
    if not ray.is_initialized():
        for k, v in RAY_ENV.items():
            os.environ.setdefault(k, v)
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if opts.address is None:
            kw["_node_ip_address"] = "127.0.0.1"  # a Ray started here listens on loopback only
        # "local": a new Ray of our own, never a cluster some other process left running here
        # (ray.init() without an address joins one, and then refuses num_cpus)
        ray.init(address=opts.address or "local", **{**kw, **opts.init})
        started = True
    try:
        task = ray.remote(max_retries=opts.max_retries, retry_exceptions=False)(_call)
        cell = opts.cell or run_cell
        fams = ray.put(families)
        stream_cfg = asdict(cfg.stream)
        presets = dict(PRESETS)
        refs = {
            task.remote(
                cell, name, label, run_cfg, sweep, seed, stream_cfg, fams, opts.executor, presets
            ): (label, seed)
            for seed, name, label, run_cfg, sweep in todo
        }
        pending = list(refs)
        failed: list[str] = []
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                label, seed = refs[ref]
                try:
                    run = ray.get(ref)
                except ray.exceptions.RayError as e:
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    failed.append(f"{label} seed {seed} ({type(e).__name__}: {first[:200]})")
                    continue
                finished[(label, seed)] = run
                if progress is not None:
                    tick = progress(f"{label} seed {seed}", len(run.records))
                    for _ in run.records:
                        tick()
                if on_run is not None:
                    on_run(ordered())
    finally:
        if started:
            ray.shutdown()
    if failed:
        raise RunsFailed(
            f"{len(failed)} of {len(todo)} runs failed after their retries: "
            + "; ".join(sorted(failed))
            + ". The finished runs are saved; rerun with --resume to run the missing ones."
        )
    return ordered()


__all__ = ["RAY_ENV", "RayOptions", "run_bench_ray", "run_cell"]
