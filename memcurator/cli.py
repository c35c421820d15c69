"""``memcurator`` command line: a thin shell over the library (STYLE.md rule 10).

Each command builds the library's objects from its options, calls the library, and turns the
library's errors into one line and exit code 2 (:func:`memcurator.cli_common.guarded`, applied
to every command of :data:`app`).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from memcurator.cli_common import App, TableConsole, console, fail
from memcurator.cli_results import interrupted_message, lock_results, sigint_deferred
from memcurator.cli_serve import register as register_serve_commands
from memcurator.cli_store import register as register_store_commands
from memcurator.errors import MissingExtra

app = App(
    help="Govern an LLM agent's experience memory; benchmark memory policies on real tasks.",
    no_args_is_help=True,
    add_completion=False,
)

#: The main job's policies and the OS environment's (memcurator.bench.options; kept as literals here
#: so that ``memcurator --help`` imports no benchmark module)
DEFAULT_POLICIES = "curator/align,lru,keep-all,no-memory"
OS_DEFAULT_POLICIES = DEFAULT_POLICIES

#: how to get the benchmark on a core-only install (it is its own distribution, issue 31)
INSTALL_BENCH = (
    "install memcurator-bench: pip install memcurator-bench (from a checkout: "
    "python scripts/install.py bench)"
)


def _require_bench(command: str) -> None:
    """Stop ``command`` with one line naming the distribution when the benchmark is not installed.

    The benchmark and its environments (``memcurator.bench``, ``memcurator.envs``) are the
    memcurator-bench distribution; the core's wheel holds neither, and no command imports them
    before it runs.

    Raises
    ------
    MissingExtra
        ``memcurator.bench`` cannot be found (:func:`~memcurator.cli_common.guarded` turns it into
        one line and exit code 2).
    """
    import importlib.util

    if importlib.util.find_spec("memcurator.bench") is None:
        raise MissingExtra(
            f"memcurator {command} needs the benchmark, which is not installed: {INSTALL_BENCH}"
        )


# `memcurator bench`'s options, one type each (the command's signature stays readable)
_EnvOpt = Annotated[
    str,
    typer.Option(
        help="Task environment: sql (LifelongAgentBench DB families) or os (its 500 bash "
        "tasks, each in a fresh bubblewrap sandbox; needs root and bwrap)."
    ),
]
_PoliciesOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Comma-separated policy presets (default {DEFAULT_POLICIES}; --env os: "
        f"{OS_DEFAULT_POLICIES})."
    ),
]
_TasksOpt = Annotated[
    int,
    typer.Option(
        help="Tasks per stream (N). The default run (4 policies x 100 tasks, bundled model) "
        "took ~20 min on 2 shared CPU cores, 152 of 400 calls from the cache. Victim accuracy "
        "and ASR rest on a few tasks there (flagged in the table); 20+ of each need ~600 "
        "tasks."
    ),
]
_SeedsOpt = Annotated[int, typer.Option(help="Number of seeds.")]
_SeedStartOpt = Annotated[int, typer.Option(help="First seed (seeds run seed_start..+S-1).")]
_MaxBytesOpt = Annotated[
    str,
    typer.Option(
        help="Resident budget B in bytes (k = 1,000). A list (25k,50k,100k) runs every "
        "bounded policy at each budget (labels policy@25k; keep-all and full-oracle once) "
        "and writes the budget fronts (budget_fronts.md, budget_fronts.png)."
    ),
]
_PoisonOpt = Annotated[int, typer.Option(help="Attacker entries n_p (0 = no attack).")]
_PayloadOpt = Annotated[
    str | None,
    typer.Option(
        help="Poison payload: drop, empty or comment (sql, default drop); destroy, weaken, "
        "sudo or fetch (os, default destroy)."
    ),
]
_PoisonChannelOpt = Annotated[str, typer.Option(help="external, peer, or self (forged).")]
_DriftOpt = Annotated[
    float | None,
    typer.Option(
        help="Fraction of families that migrate schema (default 0.3; --env os: the "
        "fraction that change convention, log directory or group prefix; default 0)."
    ),
]
_ZipfOpt = Annotated[float, typer.Option(help="Family popularity exponent.")]
_FamiliesOpt = Annotated[int, typer.Option(help="Families taking part.")]
_DmlShareOpt = Annotated[
    float | None,
    typer.Option(help="Share of the families that change tables (INSERT/UPDATE/DELETE)."),
]
_DriftPopularOpt = Annotated[
    bool, typer.Option(help="Migrate the most-drawn families (not random ones) at the drift.")
]
_OsVariantsOpt = Annotated[
    bool,
    typer.Option(
        help="--env os: every draw is a fresh-literal variant of its task that passed the "
        "validity rule in the sandbox (verdicts cached on disk); --no-os-variants reruns "
        "the task itself."
    ),
]
_InjectCharsOpt = Annotated[int, typer.Option(help="Injection budget in characters.")]
_PolicyFileOpt = Annotated[
    Path | None,
    typer.Option(help="TOML/JSON file of policy specs; its names can be used in --policies."),
]
_MaxTurnsOpt = Annotated[
    int,
    typer.Option(
        help="Local attempts per task: execute, read the error or a result preview, retry."
    ),
]
_ExecutorOpt = Annotated[str, typer.Option(help="gguf (local), openai (endpoint) or fake.")]
_ThreadsOpt = Annotated[int | None, typer.Option(help="CPU threads for the GGUF model.")]
_ModelPathOpt = Annotated[
    str | None, typer.Option(help="GGUF file; default: bundled Gemma-3-270M.")
]
_ExpertCostOpt = Annotated[float, typer.Option(help="USD per escalation to the expert.")]
_CacheOpt = Annotated[bool, typer.Option(help="Reuse deterministic (temperature 0) completions.")]
_OutOpt = Annotated[Path | None, typer.Option(help="Results folder; default results/<time>.")]
_OverwriteOpt = Annotated[bool, typer.Option(help="Replace the results already in --out.")]
_ResumeOpt = Annotated[
    bool,
    typer.Option(
        help="Continue an interrupted bench in --out: its finished (policy, seed) runs are "
        "kept, only the missing ones run (same settings needed; more policies or seeds "
        "may be added)."
    ),
]
_DataOpt = Annotated[
    str | None,
    typer.Option(
        help="entry_dict.json, or a folder holding it or lifelongagentbench-db/ "
        "(default: $MEMCURATOR_DATA_DIR, then ../shared/data)."
    ),
]
_PeersOpt = Annotated[
    int,
    typer.Option(
        help="Peer group: M agents (2, 4 or 8) sharing entries, with outside traffic and "
        "attacks on every channel (memcurator.bench.peers); 0 = single agents."
    ),
]
_ShareEveryOpt = Annotated[int, typer.Option(help="Peer group: a sharing round every R tasks.")]
_TransportOpt = Annotated[
    str,
    typer.Option(
        help="Peer group: inproc (threads and loopback sockets) or http (each agent its "
        "own process and store, exchanging through a `memcurator serve` hub on 127.0.0.1; "
        "the wire bytes are reported beside the in-process figure; needs the serve extra)."
    ),
]
_UplinkOpt = Annotated[
    str,
    typer.Option(
        help="Peer group: uplink budget L bytes per agent per round (a comma list "
        "runs a per-budget front)."
    ),
]
_OutsideRateOpt = Annotated[
    float, typer.Option(help="Peer group: genuine external exemplars per task and agent.")
]
_PayloadsOpt = Annotated[
    str,
    typer.Option(
        help="Peer group: attack payloads on every channel: classic (drop, empty, comment, "
        "hijack, instruction, trigger), new (exfiltrate, tool-output, false-fact, "
        "procedure: issue 22's kinds) or all."
    ),
]
_WorkloadOpt = Annotated[
    str,
    typer.Option(
        help="Peer group: control (today's), cold-start (agent 0 joins after --join-after "
        "tasks with an empty memory), rotating (popularity moves each agent onto its peers' "
        "families) or specialised (disjoint family blocks, --cross of draws outside)."
    ),
]
_PeerStoreOpt = Annotated[
    str,
    typer.Option(
        help="Peer group: store of the agents' memories and of the pooled reference (a SQLite "
        "path or a postgresql:// URL; :memory: = one in-memory store per agent)."
    ),
]
_CrossOpt = Annotated[
    float, typer.Option(help="Peer group: rotating/specialised share of draws off-block.")
]
_JoinAfterOpt = Annotated[
    int | None, typer.Option(help="Peer group, cold-start: tasks before the newcomer joins.")
]
_BaselineOpt = Annotated[
    str | None,
    typer.Option(
        help="Policy the others are paired with after the table (accuracy by task, 95% "
        "bootstrap CI, McNemar; default keep-all when it ran, '' for none). Peer group: "
        "for accuracy and uplink bytes (default: the first broadcasting one, e.g. lru)."
    ),
]
_PreferencesOpt = Annotated[
    str | None,
    typer.Option(
        help="MemPilot preference sweep: comma-separated lambda_C:lambda_L pairs (e.g. "
        "0:0,0.5:0,1:0,0:1); adds one mempilot preset per pair and the fixed pipelines, and "
        "writes fronts.png (quality-cost and quality-latency)."
    ),
]
_PoolOpt = Annotated[
    Path | None,
    typer.Option(
        help="TOML model pool for read-time curators (\\[\\[model]] name, kind, price_in/out "
        "USD per 1M tokens, latency \\[b, a_in, a_out]); default: extractive, local, "
        "expert-sim."
    ),
]
_CuratorLearningOpt = Annotated[
    bool,
    typer.Option(help="Let learning curators (jitmem, mempilot) probe executions to train on."),
]
_TrialOpt = Annotated[
    bool,
    typer.Option(
        help="After each task, trial its most relevant entry on trust probation in one "
        "contained shadow attempt (the task's checker only; never the live answer); a pass "
        "releases the entry. One extra executor call per trialled task (SQL)."
    ),
]
_VectorDtypeOpt = Annotated[
    str,
    typer.Option(
        help="Stored precision of entry vectors: float32, float16 (1,024 bytes a 512-d "
        "vector instead of 2,048), int8 (516) or binary (64: sign bits, exact vectors "
        "derived from the text; hashing embedder only); the budget counts the bytes stored."
    ),
]
_CompressTextOpt = Annotated[
    bool,
    typer.Option(
        help="Store texts zstd-compressed with a dictionary trained per run's namespace "
        "(about a third of the UTF-8 bytes on the SQL stream); the budget counts the "
        "compressed bytes and the dictionary."
    ),
]
_RayOpt = Annotated[
    str | None,
    typer.Option(
        help="Run the (policy, seed, budget) runs as Ray tasks: 'local' starts Ray on this "
        "machine, or a cluster ADDRESS (ray://host:10001, auto). Needs memcurator\\[ray]. A "
        "run whose worker dies is retried; --resume finishes a sweep that stopped."
    ),
]
_FoldersArg = Annotated[list[Path], typer.Argument(help="Result folders of memcurator bench.")]


@app.command()
def bench(
    env: _EnvOpt = "sql",
    policies: _PoliciesOpt = None,
    tasks: _TasksOpt = 100,
    seeds: _SeedsOpt = 1,
    seed_start: _SeedStartOpt = 0,
    max_bytes: _MaxBytesOpt = "100000",
    poison: _PoisonOpt = 4,
    payload: _PayloadOpt = None,
    poison_channel: _PoisonChannelOpt = "external",
    drift: _DriftOpt = None,
    zipf: _ZipfOpt = 1.1,
    families: _FamiliesOpt = 60,
    dml_share: _DmlShareOpt = None,
    drift_popular: _DriftPopularOpt = False,
    os_variants: _OsVariantsOpt = True,
    inject_chars: _InjectCharsOpt = 1200,
    policy_file: _PolicyFileOpt = None,
    max_turns: _MaxTurnsOpt = 1,
    executor: _ExecutorOpt = "gguf",
    threads: _ThreadsOpt = None,
    model_path: _ModelPathOpt = None,
    expert_cost: _ExpertCostOpt = 0.002,
    cache: _CacheOpt = True,
    out: _OutOpt = None,
    overwrite: _OverwriteOpt = False,
    resume: _ResumeOpt = False,
    data: _DataOpt = None,
    peers: _PeersOpt = 0,
    share_every: _ShareEveryOpt = 10,
    transport: _TransportOpt = "inproc",
    uplink: _UplinkOpt = "20000",
    outside_rate: _OutsideRateOpt = 0.1,
    payloads: _PayloadsOpt = "classic",
    workload: _WorkloadOpt = "control",
    peer_store: _PeerStoreOpt = ":memory:",
    cross: _CrossOpt = 0.2,
    join_after: _JoinAfterOpt = None,
    baseline: _BaselineOpt = None,
    preferences: _PreferencesOpt = None,
    pool: _PoolOpt = None,
    curator_learning: _CuratorLearningOpt = True,
    trial: _TrialOpt = False,
    vector_dtype: _VectorDtypeOpt = "float32",
    compress_text: _CompressTextOpt = False,
    ray: _RayOpt = None,
) -> None:
    """Run policies side by side on recurring SQL task families with drift and poisoning."""
    _require_bench("bench")
    from memcurator.bench.budget_fronts import parse_budgets
    from memcurator.bench.checks import budget_warning, clamp_families
    from memcurator.bench.options import BenchOptions
    from memcurator.bench.runner import load_families
    from memcurator.bench.session import make_executor

    opts = BenchOptions(
        env=env, policies=policies, payload=payload, drift=drift, peers=peers, out=out,
        overwrite=overwrite, resume=resume, transport=transport, payloads=payloads, ray=ray,
    ).resolve()  # fmt: skip
    assert opts.policies is not None and opts.payload is not None and opts.drift is not None
    assert opts.out is not None
    budgets = parse_budgets(max_bytes)
    fams = load_families(data, env)
    families, too_many = clamp_families(families, len(fams))
    cfg = _bench_config(
        opts.policies, preferences, policy_file, pool,
        seeds=list(range(seed_start, seed_start + seeds)), budgets=budgets, tasks=tasks, zipf=zipf,
        families=families, drift=opts.drift, poison=poison, payload=opts.payload,
        dml_share=dml_share, drift_popular=drift_popular, inject_chars=inject_chars,
        expert_cost=expert_cost, max_turns=max_turns, curator_learning=curator_learning,
        poison_channel=poison_channel, trial=trial, os_variants=os_variants,
        vector_dtype=vector_dtype, env=env, compress_text=compress_text,
    )  # fmt: skip
    ex = make_executor(executor, model_path=model_path, threads=threads, cache=cache, env=env)
    for warning in (too_many, *(budget_warning(b, vector_dtype=vector_dtype) for b in budgets)):
        if warning:
            console.print(f"[yellow]warning:[/yellow] {warning}")
    if peers:
        from memcurator.cli_peers import bench_peers

        bench_peers(
            cfg, fams, ex, opts.out, overwrite, peers=peers, share_every=share_every,
            uplink=uplink, outside_rate=outside_rate, payloads=payloads, families=families,
            baseline=baseline, transport=transport, workload=workload, store=peer_store,
            cross=cross, join_after=join_after,
        )  # fmt: skip
        return
    factory = functools.partial(
        make_executor, executor, model_path=model_path, threads=threads, cache=cache
    )
    _bench_single(
        cfg, ex, fams, opts, baseline=baseline, header=(
            f"{len(cfg.policies)} policies × {seeds} seeds × {tasks} tasks, {families} of "
            f"{len(fams)} variant families, B={max_bytes} bytes"
        ), preferences=preferences, pool=pool, executor_factory=factory,
    )  # fmt: skip


def _bench_single(
    cfg: Any,
    ex: Any,
    fams: list[Any],
    opts: Any,
    *,
    baseline: str | None,
    header: str,
    preferences: str | None,
    pool: Path | None,
    executor_factory: Callable[[], Any],
) -> None:
    """``bench`` without a peer group: run every (policy, seed, budget) into ``opts.out``, then
    print the tables, the pairing with the baseline and the completion cache's use."""
    from memcurator.bench.options import paired_baseline
    from memcurator.bench.render import print_summary
    from memcurator.bench.report import summarize
    from memcurator.bench.runner import n_runs_per_seed
    from memcurator.bench.session import bench_settings, run_to_folder

    out_dir = opts.out
    pair_with = paired_baseline(baseline, cfg.policies)
    lock = lock_results(out_dir, opts.overwrite, resume=opts.resume)
    console.print(
        f"[bold]memcurator bench[/bold]: {header} → {out_dir}"
        + (" (resuming)" if opts.resume else "")
    )
    settings = bench_settings(
        cfg, ex, argv=sys.argv, preferences=preferences, pool=str(pool) if pool else None
    )
    n_runs = n_runs_per_seed(cfg) * len(cfg.seeds)
    ray_opts = None
    if opts.ray is not None:
        from memcurator.bench.distributed import RayOptions

        ray_opts = RayOptions(None if opts.ray == "local" else opts.ray, executor_factory)
    try:
        with _progress(n_runs * cfg.stream.n_tasks) as start:
            runs, paths = run_to_folder(
                cfg, ex, fams, out_dir, settings, resume=opts.resume, progress=start,
                save_guard=sigint_deferred, ray=ray_opts,
            )  # fmt: skip
    except KeyboardInterrupt:
        console.print(interrupted_message(out_dir, n_runs, lock))
        raise typer.Exit(code=130) from None
    finally:
        lock.release()
    print_summary(summarize(runs), TableConsole())
    if pair_with and len(cfg.policies) > 1:
        from memcurator.bench.compare import rich_table
        from memcurator.bench.results import compare_folders

        rows = compare_folders([out_dir], pair_with)
        TableConsole().print(rich_table(rows, pair_with, outcome="local_ok", subset=None))
    hits = getattr(ex, "hits", None)
    if hits is not None and opts.ray is None:  # under --ray the workers' executors served calls
        console.print(
            f"completion cache: {hits} hits, {getattr(ex, 'misses', 0)} misses "
            "(hits replay a deterministic call and its measured latency)"
        )
    console.print("wrote " + ", ".join(str(p) for p in paths))


def _bench_config(
    policies: str,
    preferences: str | None,
    policy_file: Path | None,
    pool: Path | None,
    *,
    seeds: list[int],
    budgets: list[int],
    tasks: int,
    zipf: float,
    families: int,
    drift: float,
    poison: int,
    payload: str,
    dml_share: float | None,
    drift_popular: bool,
    inject_chars: int,
    expert_cost: float,
    max_turns: int,
    curator_learning: bool,
    poison_channel: str,
    vector_dtype: str,
    env: str = "sql",
    trial: bool = False,
    os_variants: bool = True,
    compress_text: bool = False,
) -> Any:
    """The :class:`~memcurator.bench.runner.BenchConfig` of ``bench``'s options.

    Registers the presets of ``--policy-file`` and of ``--preferences`` (with the fixed
    pipelines they are compared with) first, so that their names can be used.
    """
    from memcurator.bench.agent import AgentConfig
    from memcurator.bench.options import OS_MAX_TOKENS
    from memcurator.bench.runner import BenchConfig
    from memcurator.bench.stream import StreamConfig

    if policy_file is not None:
        from memcurator.policy import register
        from memcurator.policy.presets import load_policy_file

        for pname, pspec in load_policy_file(policy_file).items():
            register(pname, pspec)
    names = [p.strip() for p in policies.split(",") if p.strip()]
    if preferences is not None:
        from memcurator.bench.fronts import FIXED_PIPELINES, parse_preferences, register_preferences

        extra = register_preferences(parse_preferences(preferences)) + list(FIXED_PIPELINES)
        names += [n for n in extra if n not in names]
    model_pool = None
    if pool is not None:
        from memcurator.curate.pool import load_pool

        model_pool = load_pool(pool)
    return BenchConfig(
        policies=names,
        seeds=seeds,
        stream=StreamConfig(
            n_tasks=tasks,
            zipf=zipf,
            n_families=families,
            drift=drift,
            poison=poison,
            payload=payload,
            dml_share=dml_share,
            drift_popular=drift_popular,
            env=env,
            os_variants=os_variants,
        ),
        agent=AgentConfig(
            inject_chars=inject_chars,
            expert_cost_usd=expert_cost,
            # an OS episode has upstream's 5 agent rounds unless --max-turns asks for more
            max_turns=max(max_turns, 5) if env == "os" else max_turns,
            # a bash block with a Think line needs more than one SQL line's tokens
            **({"max_tokens": OS_MAX_TOKENS} if env == "os" else {}),
            pool=model_pool,
            learn=curator_learning,
            trial=trial,
        ),
        max_bytes=budgets[0],
        poison_channel=poison_channel,
        sweep_values=budgets if len(budgets) > 1 else (),
        vector_dtype=vector_dtype,
        compress_text=compress_text,
    )


@contextmanager
def _progress(total: int) -> Iterator[Callable[[str, int], Callable[[], None]]]:
    """Progress bars on a terminal, a plain line per tenth of a run otherwise (a log file).

    Yields ``start(label, n_tasks) -> tick``, as :func:`~memcurator.bench.runner.run_bench`
    takes it.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    plain = not console.is_terminal
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=plain,
    ) as prog:
        overall = prog.add_task("all", total=total)

        def start(label: str, n: int) -> Callable[[], None]:
            tid = prog.add_task(label, total=n)
            t0 = time.monotonic()
            done = [0]
            every = max(1, n // 10)

            def tick() -> None:
                prog.advance(tid)
                prog.advance(overall)
                done[0] += 1
                if plain and (done[0] % every == 0 or done[0] == n):
                    print(
                        f"{label}: {done[0]}/{n} tasks, {time.monotonic() - t0:.0f} s",
                        file=sys.stderr,
                        flush=True,
                    )

            return tick

        yield start


@app.command()
def report(
    folders: _FoldersArg,
    out: Annotated[Path | None, typer.Option(help="Write the merged summary here.")] = None,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a Markdown table instead.")
    ] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print strict JSON instead.")] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            help="Write one self-contained HTML page (tables, plots, settings, sample sizes, "
            "glossary) to this file (a folder: report.html in it).",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Peer-group folders: the policy paired with the others for accuracy and uplink "
            "bytes (default: the folders' baseline, else the first broadcasting policy)."
        ),
    ] = None,
) -> None:
    """Merge the runs of several bench result folders (e.g. one per seed) into one summary.

    The table fits the terminal (columns that do not fit go to a second table); each measure
    shows n, the number of tasks it rests on. --markdown, --csv and --json print for machines.
    Peer-group folders (bench --peers) merge into records.csv, peers.md and the uplink front;
    they cannot be merged with single-agent folders.
    """
    _require_bench("report")
    from memcurator.bench.results import check_out, merge_folders

    if sum((as_markdown, as_csv, as_json)) > 1:
        fail("choose one of --markdown, --csv and --json")
    fmt = "markdown" if as_markdown else "csv" if as_csv else "json" if as_json else None
    if out is not None:
        check_out(out, folders)
    merged = merge_folders(folders)
    if merged.kind == "peers":
        if as_csv or html is not None:
            fail(
                "--csv and --html are for single-agent folders; peer-group folders give "
                "peers.md (--markdown) and --json"
            )
        from memcurator.cli_peers import report_peers

        report_peers(merged, out, baseline, as_markdown=as_markdown, as_json=as_json)
        return
    if baseline is not None:
        fail("--baseline is for peer-group folders; see `memcurator compare`")
    config = {**merged.config}
    config.pop("complete")
    _print_merged(merged, config, fmt)
    if out is not None:
        from memcurator.bench.results import write_merged

        lock = lock_results(out, overwrite=True, what="memcurator report")
        try:
            written = write_merged(out, merged)
        finally:
            lock.release()
        console.print("wrote " + ", ".join(str(p) for p in written))
    if html is not None:
        _write_html(html, merged, config, folders)


def _print_merged(merged: Any, config: dict[str, Any], fmt: str | None) -> None:
    """``report``'s table of single-agent folders in ``fmt`` (None: the terminal's table, then
    the budget front when the runs form one), and the partial folders."""
    from memcurator.bench.budget_fronts import front_rows, is_front, print_front
    from memcurator.bench.render import print_summary, to_csv, to_json, to_markdown

    summary = merged.summary
    if fmt == "markdown":
        print(to_markdown(summary))
    elif fmt == "csv":
        print(to_csv(summary), end="")
    elif fmt == "json":
        print(to_json(summary, config))
    else:
        print_summary(summary, TableConsole())
    if merged.partial:
        console.print(
            "[yellow]partial folders (interrupted runs):[/yellow] " + "; ".join(merged.partial)
        )
    if is_front(merged.runs) and fmt is None:
        print_front(front_rows(merged.runs, merged.records), TableConsole())


def _write_html(html: Path, merged: Any, config: dict[str, Any], folders: list[Path]) -> None:
    """``report --html``: one self-contained page (a folder: ``report.html`` in it)."""
    from memcurator.bench.html import write_report_page

    page = html / "report.html" if html.is_dir() else html
    try:
        write_report_page(
            page,
            merged.summary,
            config=config,
            records=merged.records,
            extra_plots=[p for f in folders for p in sorted(f.glob("*.png"))],
            partial=merged.partial,
        )
    except OSError as e:
        fail(f"cannot write {page}: {e}")
    console.print(f"wrote {page}")


@app.command()
def compare(
    folders: _FoldersArg,
    baseline: Annotated[str, typer.Option(help="Policy the others are compared with.")] = (
        "keep-all"
    ),
    outcome: Annotated[
        str, typer.Option(help="0/1 column: local_ok, escalated, payload_executed, ...")
    ] = "local_ok",
    subset: Annotated[
        str | None, typer.Option(help="Only tasks of this subset: clean, victim, attacker.")
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
) -> None:
    """Paired per-task comparison of each policy with a baseline (bootstrap CI, McNemar)."""
    _require_bench("compare")
    from memcurator.bench.compare import rich_table
    from memcurator.bench.results import compare_folders

    rows = compare_folders(folders, baseline, outcome=outcome, subset=subset, n_boot=n_boot)
    TableConsole(width=max(120, Console().width)).print(
        rich_table(rows, baseline, outcome=outcome, subset=subset)
    )


@app.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Full specs as JSON.")] = False,
) -> None:
    """List the policy presets: each decision's component and a line on the preset.

    The table fits the terminal's width (descriptions wrap); --json prints the full specs.
    """
    import json

    from rich import box
    from rich.table import Table
    from rich.text import Text

    from memcurator.policy import POLICIES, policy_spec

    if as_json:
        print(json.dumps({n: policy_spec(n) for n in sorted(POLICIES)}, indent=1))
        return
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_lines=False)
    t.add_column("policy", no_wrap=True)
    t.add_column("what it does", ratio=3, overflow="fold")
    t.add_column("components", ratio=2, overflow="fold")
    for name in sorted(POLICIES):
        spec = policy_spec(name)
        unbounded = "" if spec.get("bounded", True) else " [unbounded in bench]"
        desc = f"{spec.get('description', '')}{unbounded}"
        t.add_row(Text(name), Text(desc), Text(" ".join(_components(spec))))
    TableConsole().print(t)


def _components(spec: dict[str, Any]) -> list[str]:
    """``decision=component`` for each decision a preset sets (``learn=a+b`` for learners)."""
    comps = []
    for d in ("admit", "form", "keep", "rank", "learn", "share"):
        v = spec.get(d)
        if d == "learn":
            if v:
                comps.append("learn=" + "+".join(c["name"] for c in v))
        elif v:
            comps.append(f"{d}={v['name']}")
    return comps


register_store_commands(app)
register_serve_commands(app)


if __name__ == "__main__":
    app()
