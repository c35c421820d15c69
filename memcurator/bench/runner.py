"""Run several memory policies side by side on the same streams, seeds and executor."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from memcurator.bench.agent import AgentConfig, TaskRecord, run_task
from memcurator.bench.measures import FamilyCoverage
from memcurator.bench.stream import Stream, StreamConfig, build_stream
from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.memory import Memory
from memcurator.policy import create_policy
from memcurator.store import open_store
from memcurator.types import Entry


@dataclass
class BenchConfig:
    """One benchmark: policies × seeds over streams built from ``stream``."""

    policies: Sequence[str] = ("curator", "keep-all", "lru", "recency", "success-only")
    seeds: Sequence[int] = (0,)
    stream: StreamConfig = field(default_factory=StreamConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    max_bytes: int = 120_000
    poison_channel: str = "external"
    #: budget fronts: run every bounded policy once per value of the setting ``sweep_setting``
    #: (a field of this config; unbounded presets run once, as references). Empty: no sweep.
    sweep_values: Sequence[int] = ()
    sweep_setting: str = "max_bytes"
    #: stored precision of entry vectors (:mod:`memcurator.store.vectors`)
    vector_dtype: str = "float32"
    #: store each run's texts zstd-compressed with a per-namespace dictionary
    #: (:mod:`memcurator.store.compression`); the budget counts the compressed bytes
    compress_text: bool = False

    def __post_init__(self) -> None:
        from memcurator.store.vectors import check_dtype

        check_dtype(self.vector_dtype)
        if self.poison_channel not in ("external", "peer", "self"):
            raise InvalidInput("poison_channel must be external, peer or self")
        if not self.policies:
            raise InvalidInput("at least one policy is needed")
        dup = sorted({p for p in self.policies if list(self.policies).count(p) > 1})
        if dup:
            raise InvalidInput(f"policies listed twice: {dup}")
        if len(set(self.seeds)) != len(self.seeds):
            raise InvalidInput(f"seeds listed twice: {list(self.seeds)}")
        if not self.seeds:
            raise InvalidInput("at least one seed is needed")
        if self.max_bytes < 1:
            raise InvalidInput(
                f"max_bytes must be a positive number of bytes, got {self.max_bytes}"
            )
        for p in self.policies:
            create_policy(p)  # unknown names fail before any work starts
        if self.sweep_values:
            from memcurator.bench.budget_fronts import check_sweep

            check_sweep(self)


@dataclass
class PolicyRun:
    """Per-task records of one (policy, seed) run plus its poison write outcomes."""

    policy: str
    seed: int
    records: list[TaskRecord]
    poison_admitted: int
    poison_written: int
    wall_s: float
    decisions: dict[str, int]
    #: the byte budget the memory ran under (None: unbounded)
    budget: int | None = None
    #: (setting, value) of a budget-front run; None outside a sweep
    sweep: tuple[str, int] | None = None
    #: the preset (``policy`` carries ``@<value>`` in a sweep)
    base_policy: str = ""
    #: bytes of the resident entries at the end, by part (text, meta, vec) and their count
    bytes_by_part: dict[str, int] = field(default_factory=dict)
    #: family coverage of the resident set (:class:`~memcurator.bench.measures.FamilyCoverage`)
    family_coverage: dict[str, float] = field(default_factory=dict)


def _oracle(
    task_family: str, step: int, drifted: set[str], drift_step: int
) -> Callable[[Entry], bool]:
    """Whether an entry is a correct, current exemplar for a task of ``task_family`` at ``step``:
    same family, not poison, and, for a drifted family after its migration, written after it."""
    stale_before = drift_step if (task_family in drifted and step >= drift_step) else None

    def ok(m: Entry) -> bool:
        if m.meta.get("poison") or m.meta.get("family") != task_family:
            return False
        return stale_before is None or m.created_step >= stale_before

    return ok


def run_policy(
    policy_name: str,
    stream: Stream,
    executor: Any,
    cfg: BenchConfig,
    seed: int,
    *,
    on_task: Callable[[], None] | None = None,
    label: str | None = None,
    sweep: tuple[str, int] | None = None,
) -> PolicyRun:
    """Run one policy over one stream with a fresh in-memory store.

    ``label`` names the run in records and summaries (default: the preset name; a budget front
    uses ``name@value``); ``sweep`` is recorded on the run.
    """
    policy = create_policy(policy_name)
    name = label or policy_name
    budget = cfg.max_bytes if policy.bounded else None
    mem = Memory(
        ":memory:",
        namespace=f"{name}-{seed}",
        store=open_store(":memory:", compress_text=True) if cfg.compress_text else None,
        policy=policy,
        # keep-all and full-oracle are the unbounded references: the budget is given to every
        # bounded preset, and None (explicitly unbounded) to those
        max_bytes=budget,
        seed=seed,
        vector_dtype=cfg.vector_dtype,
    )
    set_budget = getattr(policy, "set_budget", None)
    if set_budget is not None:
        set_budget(budget)  # policies whose rules read the byte budget (tokenworth/bytes-capacity)
    records: list[TaskRecord] = []
    cover = FamilyCoverage([t.family for t in stream.tasks])
    admitted = written = 0
    t0 = time.perf_counter()
    for step, task in enumerate(stream.tasks):
        if stream.poison is not None and step == stream.poison.step:
            for text, fam in zip(stream.poison.texts, stream.poison.targets, strict=True):
                written += 1
                try:
                    r = mem.write(
                        text,
                        origin=cfg.poison_channel,
                        kind="insight",
                        origin_detail="attacker",
                        meta={"poison": True, "family": fam},
                    )
                except BudgetExceeded:
                    continue
                admitted += int(r.admitted)
        policy.set_oracle(_oracle(task.family, step, stream.drifted, stream.drift_step))
        if cfg.stream.env == "os":
            from memcurator.bench.os_agent import run_os_task

            payload = stream.poison.payload if stream.poison is not None else None
            rec = run_os_task(
                task, mem, executor, cfg.agent, policy_name=name, seed=seed, step=step,
                poison_payload=payload,
            )  # fmt: skip
        else:
            rec = run_task(task, mem, executor, cfg.agent, policy_name=name, seed=seed, step=step)
        records.append(rec)
        cover.observe(step, _exemplar_families(mem))
        if on_task is not None:
            on_task()
    counts: dict[str, int] = {}
    for d in mem.decisions():
        counts[d.action] = counts.get(d.action, 0) + 1
    codec = getattr(mem.store, "text_codec", None) if cfg.compress_text else None
    parts = entry_bytes_by_part(
        mem.entries(), mem.vector_dtype, None if codec is None else codec(mem.namespace)
    )
    mem.close()
    return PolicyRun(
        name,
        seed,
        records,
        admitted,
        written,
        time.perf_counter() - t0,
        counts,
        budget=budget,
        sweep=sweep,
        base_policy=policy_name,
        bytes_by_part=parts,
        family_coverage=cover.result(),
    )


def _exemplar_families(mem: Memory) -> list[str | None]:
    """The family of each resident exemplar (poison left out), as the bench labelled it."""
    return [m.meta.get("family") for m in mem.entries() if not m.meta.get("poison")]


def entry_bytes_by_part(
    entries: Sequence[Entry], vector_dtype: str = "float32", text_codec: Any = None
) -> dict[str, int]:
    """Resident bytes split as :func:`~memcurator.store.sizing.default_sizeof` counts them.

    Parameters
    ----------
    entries : sequence of Entry
    vector_dtype : {"float32", "float16", "int8"}, default "float32"
        The precision the vectors are stored in (the namespace's).
    text_codec : NamespaceCodec, optional
        How the namespace stores its texts (a compressing store's
        :meth:`~memcurator.store.sqlite.SQLiteStore.text_codec`); None: UTF-8 as is.

    Returns
    -------
    dict
        ``n`` entries, ``text`` (bytes as stored: UTF-8, or the compressed frame that holds
        text and meta together, schema v8), ``meta`` (JSON bytes; 0 when folded into the
        text's frame), ``vec`` (embedding bytes as stored in ``vector_dtype``), ``detail`` (the
        origin detail's UTF-8 bytes, counted since the store counts every field), and
        ``total`` (the entries' accounted ``bytes``; may differ from the parts' sum for
        distilled or imported entries).

    Examples
    --------
    >>> import numpy as np
    >>> e = Entry("a", "ns", "raw", "hé", 30, 30, np.zeros(4, dtype=np.float32), meta={})
    >>> entry_bytes_by_part([e])
    {'n': 1, 'text': 3, 'meta': 2, 'vec': 16, 'detail': 0, 'total': 30}
    >>> entry_bytes_by_part([e], "int8")["vec"]
    8
    """
    import json

    from memcurator.store.compression import stored_entry
    from memcurator.store.vectors import vector_nbytes
    from memcurator.trust.state import sized_meta

    out = {"n": len(entries), "text": 0, "meta": 0, "vec": 0, "detail": 0, "total": 0}
    for m in entries:
        t, mj = stored_entry(
            text_codec, m.text, json.dumps(sized_meta(m.meta, m.trust), sort_keys=True)
        )
        out["text"] += len(t) if isinstance(t, bytes) else len(t.encode("utf-8"))
        out["meta"] += len(mj.encode("utf-8"))
        out["vec"] += vector_nbytes(int(m.embedding.size), vector_dtype)
        out["detail"] += len(m.origin_detail.encode("utf-8"))
        out["total"] += int(m.bytes)
    return out


def load_families(data_path: str | None = None, env: str = "sql") -> list[Any]:
    """The LifelongAgentBench specs that admit variants (the stream's families); for
    ``env="os"`` the OS tasks the sandbox can run (:func:`memcurator.envs.os.runnable_tasks`)."""
    if env == "os":
        from memcurator.envs.os import runnable_tasks

        return list(runnable_tasks(data_path))
    from memcurator.envs.sql import load_specs, variant_families

    specs = load_specs(data_path).specs
    keep = set(variant_families(specs))
    return [s for s in specs if s.family in keep]


def run_bench(
    cfg: BenchConfig,
    executor: Any,
    *,
    families: list[Any] | None = None,
    progress: Callable[[str, int], Callable[[], None]] | None = None,
    on_run: Callable[[list[PolicyRun]], None] | None = None,
    done: Sequence[PolicyRun] = (),
) -> list[PolicyRun]:
    """Every policy on every seed's stream; the same stream for all policies of a seed.

    Parameters
    ----------
    progress : callable, optional
        ``progress(label, n_tasks)`` is called when a (policy, seed) run starts and returns a
        callable invoked once per finished task.
    on_run : callable, optional
        Called with the list of finished runs after each (policy, seed) run, so that a long
        benchmark can save what it has (the CLI writes partial results this way).
    done : sequence of PolicyRun, optional
        Runs an interrupted benchmark finished (:func:`memcurator.bench.session.saved_runs`):
        they take their place in the result unchanged and are not run again. Each run is
        independent (a fresh memory on the seed's stream), so the result equals an
        uninterrupted benchmark's.
    """
    fams = families if families is not None else load_families()
    finished = {(r.policy, r.seed): r for r in done}
    runs: list[PolicyRun] = []
    for seed in cfg.seeds:
        plan = _plan(cfg)
        if all((label, seed) in finished for _, label, _, _ in plan):
            runs += [finished[(label, seed)] for _, label, _, _ in plan]
            continue
        scfg = StreamConfig(**{**asdict(cfg.stream), "seed": seed})
        if cfg.stream.env == "os":
            from memcurator.bench.os_stream import build_os_stream, stderr_progress

            show = stderr_progress(f"OS stream, seed {seed}") if progress else None
            stream = build_os_stream(scfg, fams, progress=show)
        else:
            stream = build_stream(scfg, fams)
        for name, label, run_cfg, sweep in plan:
            if (label, seed) in finished:
                runs.append(finished[(label, seed)])
                continue
            tick = progress(f"{label} seed {seed}", len(stream.tasks)) if progress else None
            runs.append(
                run_policy(
                    name, stream, executor, run_cfg, seed, on_task=tick, label=label, sweep=sweep
                )
            )
            if on_run is not None:
                on_run(list(runs))
    return runs


def _plan(cfg: BenchConfig) -> list[tuple[str, str, BenchConfig, tuple[str, int] | None]]:
    """(preset, label, config, sweep) per run of one seed, in run order."""
    if not cfg.sweep_values:
        return [(p, p, cfg, None) for p in cfg.policies]
    from memcurator.bench.budget_fronts import sweep_plan

    return sweep_plan(cfg)


def n_runs_per_seed(cfg: BenchConfig) -> int:
    """How many (policy, budget) runs one seed of ``cfg`` makes."""
    return len(_plan(cfg))


def plan_labels(cfg: BenchConfig) -> list[str]:
    """The run labels of one seed of ``cfg`` in run order (``policy@value`` in a sweep)."""
    return [label for _, label, _, _ in _plan(cfg)]
