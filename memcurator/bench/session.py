"""One ``memcurator bench`` into a results folder: settings, saves after every run, resume.

:func:`run_to_folder` runs a :class:`~memcurator.bench.runner.BenchConfig` and rewrites the
folder after every finished (policy, seed) run, with ``"complete": false`` in
``summary.json`` until the last, so an interrupted benchmark keeps what it finished. With
``resume=True`` it reads those finished runs back (:func:`saved_runs`), checks that the folder
was run with the same settings, and runs only the missing ones: the final folder equals an
uninterrupted run's (timing and completion-cache columns aside).
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memcurator.bench.results import RUN_KEYS, config_clash
from memcurator.errors import InvalidInput

if TYPE_CHECKING:
    from memcurator.bench.distributed import RayOptions
    from memcurator.bench.runner import BenchConfig, PolicyRun


def bench_settings(
    cfg: BenchConfig,
    executor: Any,
    *,
    argv: Sequence[str] = (),
    preferences: str | None = None,
    pool: str | None = None,
) -> dict[str, Any]:
    """The ``config`` of a results folder's ``summary.json``: what the benchmark was run with.

    Parameters
    ----------
    cfg : BenchConfig
    executor : object
        The LLM executor; its ``repr`` names the model and its settings.
    argv : sequence of str
        The command line, for the record.
    preferences, pool : str, optional
        ``--preferences`` and ``--pool`` as given (recorded, not compared).
    """
    budgets = list(cfg.sweep_values) or [cfg.max_bytes]
    return {
        "argv": list(argv),
        "env": cfg.stream.env,
        "tasks": cfg.stream.n_tasks,
        "seeds": len(cfg.seeds),
        "seed_start": cfg.seeds[0],
        "max_bytes": budgets[0] if len(budgets) == 1 else budgets,
        "poison": cfg.stream.poison,
        "payload": cfg.stream.payload,
        "poison_channel": cfg.poison_channel,
        "drift": cfg.stream.drift,
        "zipf": cfg.stream.zipf,
        "families": cfg.stream.n_families,
        "dml_share": cfg.stream.dml_share,
        "drift_popular": cfg.stream.drift_popular,
        "os_variants": cfg.stream.env == "os" and cfg.stream.os_variants,
        "inject_chars": cfg.agent.inject_chars,
        "executor": repr(executor),
        "policies": list(cfg.policies),
        "preferences": preferences,
        "pool": pool,
        "curator_learning": cfg.agent.learn,
        "trial": cfg.agent.trial,
        "vector_dtype": cfg.vector_dtype,
        "compress_text": cfg.compress_text,
    }


#: Context window (tokens) of the bundled model on ``--env os`` (SQL prompts fit the default 2,048).
OS_N_CTX = 8192


def make_executor(
    kind: str,
    *,
    model_path: str | None = None,
    threads: int | None = None,
    cache: bool = True,
    env: str = "sql",
) -> Any:
    """The bench's LLM executor: ``gguf`` (local), ``openai`` (endpoint) or ``fake`` (scripted).

    Parameters
    ----------
    kind : str
        A registered executor name (:func:`memcurator.llm.create_executor`).
    model_path : str, optional
        ``gguf``: the model file (default: the bundled model).
    threads : int, optional
        ``gguf``: CPU threads.
    cache : bool, default True
        Wrap a real executor in the completion cache (temperature-0 calls are replayed).
    env : {"sql", "os"}, default "sql"
        ``fake``: the scripted responder of the environment (copy the first injected exemplar's
        action: :func:`~memcurator.bench.agent.copy_first_action`,
        :func:`~memcurator.bench.os_agent.copy_first_exemplar`).

    Raises
    ------
    UnknownName
        ``kind`` is not a registered executor.
    """
    from memcurator.llm import CachedExecutor, create_executor

    kw: dict[str, object] = {}
    if kind == "fake" and env == "os":
        from memcurator.bench.os_agent import copy_first_exemplar

        kw = {"responder": copy_first_exemplar}
    elif kind == "fake":
        from memcurator.bench.agent import copy_first_action

        kw = {"responder": copy_first_action}
    if kind == "gguf":
        kw = {"model_path": model_path, "n_threads": threads}
        if env == "os":
            # five rounds of commands and (truncated) outputs outgrow 2,048 tokens; the bundled
            # Gemma-3-270M takes 32k. A prompt that still does not fit ends its episode.
            kw["n_ctx"] = OS_N_CTX
    ex = create_executor(kind, **kw)
    if cache and kind != "fake":
        from memcurator.llm.gguf import cache_dir

        ex = CachedExecutor(ex, cache_dir() / "completions.sqlite")
    return ex


def _cell(text: str, hint: Any) -> Any:
    """A ``records.csv`` cell back as the TaskRecord field's type (csv wrote ``str(value)``)."""
    args = typing.get_args(hint)
    if args and type(None) in args:  # "X | None": an empty cell was None
        if text == "":
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        if text not in ("True", "False"):
            raise ValueError(f"not a bool: {text!r}")
        return text == "True"
    if hint in (int, float):
        return hint(text)
    return text


def _task_records(rows: list[dict[str, str]]) -> list[Any]:
    from memcurator.bench.agent import TaskRecord

    hints = typing.get_type_hints(TaskRecord)
    return [TaskRecord(**{k: _cell(v, hints[k]) for k, v in row.items()}) for row in rows]


def saved_runs(folder: Path) -> list[PolicyRun]:
    """The finished runs of a results folder, restored as :class:`PolicyRun` objects.

    Reads ``summary.json`` (each run's counts, budget and byte split) and ``records.csv`` (its
    per-task records). A restored run gives the same records and metrics as the run that was
    saved.

    Parameters
    ----------
    folder : Path
        A folder written by ``memcurator bench`` (complete or interrupted).

    Returns
    -------
    list of PolicyRun
        In the order they were saved; empty when the folder holds no ``summary.json``.

    Raises
    ------
    InvalidInput
        ``summary.json`` or ``records.csv`` is unreadable, a run lacks its records, or a run
        was saved by a memcurator that did not record its byte split.
    """
    from memcurator.bench.compare import read_records
    from memcurator.bench.report import read_summary
    from memcurator.bench.runner import PolicyRun

    if not (folder / "summary.json").exists():
        return []
    doc = read_summary(folder)
    if not doc["runs"]:
        return []
    try:
        rows = read_records([folder])
    except FileNotFoundError as e:
        raise InvalidInput(f"cannot resume {folder}: {e}") from None
    by_run: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        by_run.setdefault((row["policy"], row["seed"]), []).append(row)
    out = []
    for r in doc["runs"]:
        key = (str(r["policy"]), str(r["seed"]))
        if key not in by_run or "bytes_by_part" not in r:
            why = "its records" if key not in by_run else "its byte split (an older memcurator)"
            raise InvalidInput(
                f"cannot resume {folder}: the run {key[0]} seed {key[1]} lacks {why}; start "
                "again with --overwrite"
            )
        try:
            records = _task_records(by_run[key])
        except (TypeError, ValueError, KeyError) as e:
            raise InvalidInput(f"cannot resume {folder}: records.csv: {e}") from None
        setting, value = r.get("sweep_setting"), r.get("sweep_value")
        out.append(
            PolicyRun(
                policy=str(r["policy"]),
                seed=int(r["seed"]),
                records=records,
                poison_admitted=int(r["poison_admitted"]),
                poison_written=int(r["poison_written"]),
                wall_s=float(r["wall_s"]),
                decisions=dict(r["decisions"]),
                budget=r.get("max_bytes"),
                sweep=(str(setting), int(value)) if setting is not None else None,
                base_policy=str(r.get("base_policy") or r["policy"]),
                bytes_by_part={k: int(v) for k, v in r["bytes_by_part"].items()},
                family_coverage={
                    k: float(r[k])
                    for k in ("family_coverage", "family_coverage_mean")
                    if r.get(k) is not None
                },
            )
        )
    return out


def resume_check(folder: Path, settings: dict[str, Any], planned: set[tuple[str, int]]) -> None:
    """Refuse to resume ``folder`` with other settings or without a run it holds.

    Raises
    ------
    InvalidInput
        The folder's settings differ on one of :data:`RUN_KEYS`, or it holds a (policy, seed)
        run that is not in ``planned``.
    """
    from memcurator.bench.report import read_summary

    if not (folder / "summary.json").exists():
        return
    doc = read_summary(folder)
    clash = config_clash([(folder, doc["config"]), ("this bench", settings)], RUN_KEYS)
    if clash:
        raise InvalidInput(
            f"cannot resume {folder}: it was run with other settings ({clash}); run with the "
            "folder's settings, or choose another --out"
        )
    extra = sorted({(str(r["policy"]), int(r["seed"])) for r in doc["runs"]} - planned)
    if extra:
        raise InvalidInput(
            f"cannot resume {folder}: it holds runs this bench would not make "
            f"({', '.join(f'{p} seed {s}' for p, s in extra)}); list their policies and seeds "
            "too, or choose another --out"
        )


def run_to_folder(
    cfg: BenchConfig,
    executor: Any,
    families: list[Any],
    out: Path,
    settings: dict[str, Any],
    *,
    resume: bool = False,
    progress: Callable[[str, int], Callable[[], None]] | None = None,
    save_guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ray: RayOptions | None = None,
) -> tuple[list[PolicyRun], list[Path]]:
    """Run ``cfg`` into the results folder ``out``, saving after every (policy, seed) run.

    Parameters
    ----------
    cfg : BenchConfig
    executor : object
        The LLM executor (:func:`memcurator.llm.create_executor`).
    families : list
        The task families (:func:`memcurator.bench.runner.load_families`).
    out : Path
        The results folder; the caller holds its lock.
    settings : dict
        The folder's ``config`` (:func:`bench_settings`).
    resume : bool, default False
        Keep the finished runs already in ``out`` and run only the missing ones.
    progress : callable, optional
        As for :func:`memcurator.bench.runner.run_bench`.
    save_guard : callable, optional
        A context manager around each save (the CLI holds back Ctrl-C there).
    ray : RayOptions, optional
        Run the (policy, seed, budget) runs as Ray tasks
        (:func:`memcurator.bench.distributed.run_bench_ray`); ``executor`` then only names the
        settings, each worker builds its own from ``ray.executor``. The folder is saved after
        every finished run either way.

    Returns
    -------
    runs : list of PolicyRun
    paths : list of Path
        The files of the final save.

    Raises
    ------
    InvalidInput
        ``resume`` and the folder cannot be resumed (:func:`resume_check`, :func:`saved_runs`).
    RunsFailed
        With ``ray``: some runs failed after their retries (the others are saved).
    """
    from memcurator.bench.report import summarize, write_results
    from memcurator.bench.runner import n_runs_per_seed, plan_labels, run_bench

    n_runs = n_runs_per_seed(cfg) * len(cfg.seeds)
    done: list[PolicyRun] = []
    if resume:
        resume_check(out, settings, {(lb, s) for s in cfg.seeds for lb in plan_labels(cfg)})
        done = saved_runs(out)

    def write(runs: list[PolicyRun]) -> list[Path]:
        meta = {**settings, "complete": len(runs) == n_runs, "runs_done": len(runs)}
        return write_results(out, runs, summarize(runs), meta)

    def save(runs: list[PolicyRun]) -> None:
        # kept runs not reached yet are saved too: an interrupt never loses a finished run
        have = {(r.policy, r.seed) for r in runs}
        with save_guard():  # a save is never cut in half
            write(runs + [r for r in done if (r.policy, r.seed) not in have])

    if ray is not None:
        from memcurator.bench.distributed import run_bench_ray

        runs = run_bench_ray(cfg, ray, families=families, progress=progress, on_run=save, done=done)
    else:
        runs = run_bench(
            cfg, executor, families=families, progress=progress, on_run=save, done=done
        )
    with save_guard():
        paths = write(runs)
    return runs, paths


__all__ = [
    "bench_settings",
    "make_executor",
    "resume_check",
    "run_to_folder",
    "saved_runs",
]
