"""``memcurator`` command line: a thin shell over the library (STYLE.md rule 10)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from memcurator.cli_results import interrupted_message, lock_results, sigint_deferred
from memcurator.cli_store import register as register_store_commands
from memcurator.errors import MemcuratorError

app = typer.Typer(
    help="Govern an LLM agent's experience memory; benchmark memory policies on real tasks.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True)

DEFAULT_POLICIES = "curator,keep-all,lru,recency,success-only,no-memory"


def _fail(e: Exception) -> None:
    console.print(f"[red]error:[/red] {e}")
    raise typer.Exit(code=2)


@app.command()
def bench(
    env: Annotated[str, typer.Option(help="Task environment; only 'sql' exists.")] = "sql",
    policies: Annotated[
        str, typer.Option(help="Comma-separated policy presets.")
    ] = DEFAULT_POLICIES,
    tasks: Annotated[
        int,
        typer.Option(
            help="Tasks per stream (N). The default run (6 policies x 50 tasks, bundled model) "
            "took 7 min on 2 busy CPU cores without the completion cache. Victim accuracy "
            "and ASR rest on 1-3 tasks there (flagged in the table); 20+ of each need ~600 "
            "tasks."
        ),
    ] = 50,
    seeds: Annotated[int, typer.Option(help="Number of seeds.")] = 1,
    seed_start: Annotated[int, typer.Option(help="First seed (seeds run seed_start..+S-1).")] = 0,
    max_bytes: Annotated[
        str,
        typer.Option(
            help="Resident budget B in bytes (k = 1,000). A list (25k,50k,100k) runs every "
            "bounded policy at each budget (labels policy@25k; keep-all and full-oracle once) "
            "and writes the budget fronts (budget_fronts.md, budget_fronts.png)."
        ),
    ] = "100000",
    poison: Annotated[int, typer.Option(help="Attacker entries n_p (0 = no attack).")] = 4,
    payload: Annotated[str, typer.Option(help="Poison payload: drop, empty or comment.")] = "drop",
    poison_channel: Annotated[
        str, typer.Option(help="external, peer, or self (forged).")
    ] = "external",
    drift: Annotated[float, typer.Option(help="Fraction of families that migrate schema.")] = 0.3,
    zipf: Annotated[float, typer.Option(help="Family popularity exponent.")] = 1.1,
    families: Annotated[int, typer.Option(help="Families taking part.")] = 60,
    dml_share: Annotated[
        float | None,
        typer.Option(help="Share of the families that change tables (INSERT/UPDATE/DELETE)."),
    ] = None,
    drift_popular: Annotated[
        bool, typer.Option(help="Migrate the most-drawn families (not random ones) at the drift.")
    ] = False,
    inject_chars: Annotated[int, typer.Option(help="Injection budget in characters.")] = 1200,
    policy_file: Annotated[
        Path | None,
        typer.Option(help="TOML/JSON file of policy specs; its names can be used in --policies."),
    ] = None,
    max_turns: Annotated[
        int,
        typer.Option(
            help="Local attempts per task: execute, read the error or a result preview, retry."
        ),
    ] = 1,
    executor: Annotated[
        str, typer.Option(help="gguf (local), openai (endpoint) or fake.")
    ] = "gguf",
    threads: Annotated[int | None, typer.Option(help="CPU threads for the GGUF model.")] = None,
    model_path: Annotated[
        str | None, typer.Option(help="GGUF file; default: bundled Gemma-3-270M.")
    ] = None,
    expert_cost: Annotated[float, typer.Option(help="USD per escalation to the expert.")] = 0.002,
    cache: Annotated[
        bool, typer.Option(help="Reuse deterministic (temperature 0) completions.")
    ] = True,
    out: Annotated[
        Path | None, typer.Option(help="Results folder; default results/<time>.")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace the results already in --out.")] = False,
    data: Annotated[
        str | None,
        typer.Option(
            help="entry_dict.json, or a folder holding it or lifelongagentbench-db/ "
            "(default: $MEMCURATOR_DATA_DIR, then ../shared/data)."
        ),
    ] = None,
    peers: Annotated[
        int,
        typer.Option(
            help="Peer group: M agents (2, 4 or 8) sharing entries, with outside traffic and "
            "attacks on every channel (memcurator.bench.peers); 0 = single agents."
        ),
    ] = 0,
    share_every: Annotated[
        int, typer.Option(help="Peer group: a sharing round every R tasks.")
    ] = 10,
    uplink: Annotated[
        str,
        typer.Option(
            help="Peer group: uplink budget L bytes per agent per round (a comma list "
            "runs a per-budget front)."
        ),
    ] = "20000",
    outside_rate: Annotated[
        float, typer.Option(help="Peer group: genuine external exemplars per task and agent.")
    ] = 0.1,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Peer group: policy the others are paired with for accuracy and uplink bytes "
            "(default: the first broadcasting one, e.g. lru)."
        ),
    ] = None,
    preferences: Annotated[
        str | None,
        typer.Option(
            help="MemPilot preference sweep: comma-separated lambda_C:lambda_L pairs (e.g. "
            "0:0,0.5:0,1:0,0:1); adds one mempilot preset per pair and the fixed pipelines, and "
            "writes fronts.png (quality-cost and quality-latency)."
        ),
    ] = None,
    pool: Annotated[
        Path | None,
        typer.Option(
            help="TOML model pool for read-time curators ([[model]] name, kind, price_in/out "
            "USD per 1M tokens, latency [b, a_in, a_out]); default: extractive, local, "
            "expert-sim."
        ),
    ] = None,
    curator_learning: Annotated[
        bool,
        typer.Option(help="Let learning curators (jitmem, mempilot) probe executions to train on."),
    ] = True,
    vector_dtype: Annotated[
        str,
        typer.Option(
            help="Stored precision of entry vectors: float32, float16 (1,024 bytes a 512-d "
            "vector instead of 2,048) or int8 (516); the budget counts the bytes stored."
        ),
    ] = "float32",
) -> None:
    """Run policies side by side on recurring SQL task families with drift and poisoning."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from memcurator.bench.agent import AgentConfig
    from memcurator.bench.checks import budget_warning, clamp_families
    from memcurator.bench.render import print_summary
    from memcurator.bench.report import summarize, write_results
    from memcurator.bench.runner import (
        BenchConfig,
        PolicyRun,
        load_families,
        n_runs_per_seed,
        run_bench,
    )
    from memcurator.bench.stream import StreamConfig
    from memcurator.llm import CachedExecutor, create_executor

    if env != "sql":
        _fail(ValueError(f"unknown env {env!r}; known: ['sql']"))
    out_dir = out or Path("results") / time.strftime("%Y%m%d-%H%M%S")
    if out_dir.exists() and not out_dir.is_dir():
        _fail(ValueError(f"--out {str(out_dir)!r} is a file, not a folder"))
    try:
        from memcurator.bench.budget_fronts import parse_budgets

        budgets = parse_budgets(max_bytes)
        if policy_file is not None:
            from memcurator.policy import register
            from memcurator.policy.presets import load_policy_file

            for pname, pspec in load_policy_file(policy_file).items():
                register(pname, pspec)
        names = [p.strip() for p in policies.split(",") if p.strip()]
        if preferences is not None:
            from memcurator.bench.fronts import (
                FIXED_PIPELINES,
                parse_preferences,
                register_preferences,
            )

            extra = register_preferences(parse_preferences(preferences)) + list(FIXED_PIPELINES)
            names += [n for n in extra if n not in names]
        model_pool = None
        if pool is not None:
            from memcurator.curate.pool import load_pool

            model_pool = load_pool(pool)
        cfg = BenchConfig(
            policies=names,
            seeds=list(range(seed_start, seed_start + seeds)),
            stream=StreamConfig(
                n_tasks=tasks,
                zipf=zipf,
                n_families=families,
                drift=drift,
                poison=poison,
                payload=payload,
                dml_share=dml_share,
                drift_popular=drift_popular,
            ),
            agent=AgentConfig(
                inject_chars=inject_chars,
                expert_cost_usd=expert_cost,
                max_turns=max_turns,
                pool=model_pool,
                learn=curator_learning,
            ),
            max_bytes=budgets[0],
            poison_channel=poison_channel,
            sweep_values=budgets if len(budgets) > 1 else (),
            vector_dtype=vector_dtype,
        )
        fams = load_families(data)
        families, too_many = clamp_families(families, len(fams))
        cfg.stream.n_families = families
        kw: dict[str, object] = {}
        if executor == "fake":
            from memcurator.bench.agent import copy_first_action

            kw = {"responder": copy_first_action}
        if executor == "gguf":
            kw = {"model_path": model_path, "n_threads": threads}
        ex = create_executor(executor, **kw)
        if cache and executor != "fake":
            from memcurator.llm.gguf import cache_dir

            ex = CachedExecutor(ex, cache_dir() / "completions.sqlite")
    except MemcuratorError as e:
        _fail(e)
        return
    for warning in (too_many, *(budget_warning(b, vector_dtype=vector_dtype) for b in budgets)):
        if warning:
            console.print(f"[yellow]warning:[/yellow] {warning}")
    if peers:
        from memcurator.cli_peers import bench_peers

        bench_peers(
            cfg,
            fams,
            ex,
            out_dir,
            overwrite,
            peers=peers,
            share_every=share_every,
            uplink=uplink,
            outside_rate=outside_rate,
            families=families,
            baseline=baseline,
        )
        return
    if baseline is not None:
        _fail(
            ValueError(
                "--baseline is for --peers runs; compare single agents with "
                "`memcurator compare --baseline`"
            )
        )
    lock = lock_results(out_dir, overwrite)
    console.print(
        f"[bold]memcurator bench[/bold]: {len(cfg.policies)} policies × {seeds} seeds × "
        f"{tasks} tasks, {families} of {len(fams)} variant families, B={max_bytes} bytes "
        f"→ {out_dir}"
    )
    config = {
        "argv": sys.argv,
        "tasks": tasks,
        "seeds": seeds,
        "seed_start": seed_start,
        "max_bytes": budgets[0] if len(budgets) == 1 else budgets,
        "poison": poison,
        "payload": payload,
        "poison_channel": poison_channel,
        "drift": drift,
        "zipf": zipf,
        "families": families,
        "dml_share": dml_share,
        "drift_popular": drift_popular,
        "inject_chars": inject_chars,
        "executor": repr(ex),
        "policies": cfg.policies,
        "preferences": preferences,
        "pool": str(pool) if pool is not None else None,
        "curator_learning": curator_learning,
        "vector_dtype": vector_dtype,
    }
    n_runs = n_runs_per_seed(cfg) * seeds

    def save(done: list[PolicyRun]) -> None:
        with sigint_deferred():  # a save is never cut in half by Ctrl-C
            write_partial(done)

    def write_partial(done: list[PolicyRun]) -> list[Path]:
        # rewritten after every (policy, seed) run: an interrupted benchmark keeps what it finished
        meta = {**config, "complete": len(done) == n_runs, "runs_done": len(done)}
        return write_results(out_dir, done, summarize(done), meta)

    plain = not console.is_terminal  # a log file: plain lines instead of rich's bars
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=plain,
    ) as prog:
        overall = prog.add_task("all", total=n_runs * tasks)

        def start(label: str, n: int):  # type: ignore[no-untyped-def]
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

        try:
            runs = run_bench(cfg, ex, families=fams, progress=start, on_run=save)
        except MemcuratorError as e:
            lock.release()
            _fail(e)
            return
        except KeyboardInterrupt:
            prog.stop()
            console.print(interrupted_message(out_dir, n_runs, lock))
            raise typer.Exit(code=130) from None
    summary = summarize(runs)
    print_summary(summary, Console())
    paths = write_partial(runs)
    lock.release()
    hits = getattr(ex, "hits", None)
    if hits is not None:
        console.print(
            f"completion cache: {hits} hits, {getattr(ex, 'misses', 0)} misses "
            "(hits replay a deterministic call and its measured latency)"
        )
    console.print("wrote " + ", ".join(str(p) for p in paths))


@app.command()
def report(
    folders: Annotated[list[Path], typer.Argument(help="Result folders of memcurator bench.")],
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
    from memcurator.bench.compare import read_records, write_records
    from memcurator.bench.render import print_summary, to_csv, to_json, to_markdown
    from memcurator.bench.report import (
        markdown,
        plot,
        plot_over_time,
        read_summary,
        summarize,
        write_summary_json,
    )
    from memcurator.files import atomic_write

    if sum((as_markdown, as_csv, as_json)) > 1:
        _fail(ValueError("choose one of --markdown, --csv and --json"))
    runs: list[dict[str, object]] = []
    partial: list[str] = []
    configs: list[tuple[Path, dict[str, object]]] = []
    docs = []
    for f in folders:
        if out is not None and f.resolve() == out.resolve():
            _fail(ValueError(f"--out {str(out)!r} is one of the merged folders; choose another"))
        try:
            docs.append(read_summary(f))
        except MemcuratorError as e:
            _fail(e)
            return
    from memcurator.bench.peer_report import is_peer_config

    kinds = [is_peer_config(d["config"]) for d in docs]
    if any(kinds):
        if not all(kinds):
            peer = [str(f) for f, k in zip(folders, kinds, strict=True) if k]
            single = [str(f) for f, k in zip(folders, kinds, strict=True) if not k]
            _fail(
                ValueError(
                    f"cannot merge peer-group folders ({', '.join(peer)}) with single-agent "
                    f"folders ({', '.join(single)}); report each kind on its own"
                )
            )
        if as_csv or html is not None:
            _fail(
                ValueError(
                    "--csv and --html are for single-agent folders; peer-group folders "
                    "give peers.md (--markdown) and --json"
                )
            )
        from memcurator.cli_peers import report_peers

        report_peers(folders, docs, out, baseline, as_markdown=as_markdown, as_json=as_json)
        return
    if baseline is not None:
        _fail(ValueError("--baseline is for peer-group folders; see `memcurator compare`"))
    for f, doc in zip(folders, docs, strict=True):
        config = doc["config"]
        if config.get("complete") is False:
            partial.append(f"{f} ({config.get('runs_done')} runs finished)")
        configs.append((f, config))
        runs.extend(doc["runs"])
    if not runs:
        _fail(ValueError(f"no runs in {[str(f) for f in folders]}"))
    clash = _config_clash(configs)
    if clash:
        _fail(
            ValueError(
                f"the folders were run with different settings ({clash}); merge runs of "
                "one configuration only"
            )
        )
    lengths = sorted({int(r["tasks"]) for r in runs})  # type: ignore[call-overload]
    if len(lengths) > 1:
        _fail(
            ValueError(
                f"the folders hold streams of different lengths {lengths} tasks; "
                "merge runs of one configuration only"
            )
        )
    # a later folder's run of the same (policy, seed) replaces an earlier one (a rerun)
    latest = {(r["policy"], r["seed"]): r for r in runs}
    runs = list(latest.values())
    summary = summarize(runs)  # type: ignore[arg-type]
    common = {k: v for k, v in configs[0][1].items() if k in _RUN_KEYS}
    if as_markdown:
        print(to_markdown(summary))
    elif as_csv:
        print(to_csv(summary), end="")
    elif as_json:
        print(to_json(summary, {**common, "merged": [str(f) for f in folders]}))
    else:
        print_summary(summary, Console())
    if partial:
        console.print("[yellow]partial folders (interrupted runs):[/yellow] " + "; ".join(partial))
    try:
        records = (
            read_records(folders) if all((f / "records.csv").exists() for f in folders) else []
        )
    except MemcuratorError as e:
        _fail(e)
        return
    from memcurator.bench.budget_fronts import front_rows, is_front, print_front, write_front

    if is_front(runs) and not (as_markdown or as_csv or as_json):  # type: ignore[arg-type]
        print_front(front_rows(runs, records), Console())  # type: ignore[arg-type]
    if out is not None:
        lock = lock_results(out, overwrite=True, what="memcurator report")
        written = [
            write_summary_json(
                out / "summary.json",
                {
                    "merged": [str(f) for f in folders],
                    "config": {**common, "complete": not partial},
                    "summary": summary,
                    "runs": runs,
                },
            ),
            atomic_write(out / "summary.md", markdown(summary) + "\n"),
        ]
        if records:
            written.append(write_records(out / "records.csv", records))
        try:
            written.append(plot(out / "accuracy_vs_bytes.png", summary))
            if records:
                written.append(plot_over_time(out / "accuracy_over_time.png", records))
            from memcurator.bench.fronts import has_sweep, plot_fronts

            if has_sweep(summary) and any("cost_per_task" in r for r in summary):
                written.append(plot_fronts(out / "fronts.png", summary))
        except ImportError:
            pass
        written += write_front(out, runs, records)  # type: ignore[arg-type]
        lock.release()
        console.print("wrote " + ", ".join(str(p) for p in written))
    if html is not None:
        from memcurator.bench.html import write_report_page

        page = html / "report.html" if html.is_dir() else html
        try:
            write_report_page(
                page,
                summary,
                config={**common, "merged": [str(f) for f in folders]},
                records=records,
                extra_plots=[p for f in folders for p in sorted(f.glob("*.png"))],
                partial=partial,
            )
        except (MemcuratorError, OSError) as e:
            _fail(ValueError(f"cannot write {page}: {e}"))
        console.print(f"wrote {page}")


#: bench settings that must agree for runs to be merged or compared
_RUN_KEYS = (
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
    "inject_chars",
    "executor",
    "pool",
    "curator_learning",
    "vector_dtype",
)

#: settings a folder written before they existed ran at: compared as this value when missing
_RUN_DEFAULTS: dict[str, object] = {"vector_dtype": "float32"}


def _config_clash(
    configs: list[tuple[Path, dict[str, Any]]], keys: tuple[str, ...] = _RUN_KEYS
) -> str:
    """'' if all folders agree on the settings ``keys``, else a description of the first clash.

    A key missing from a folder's config is compared as its :data:`_RUN_DEFAULTS` value when it
    has one (folders written before the setting existed ran at that value), else skipped.
    """
    import re

    def norm(key: str, v: object) -> object:
        # the thread count does not change a greedy completion's text
        return (
            re.sub(r"n_threads=[^,)]*, ?", "", v) if key == "executor" and isinstance(v, str) else v
        )

    for key in keys:
        seen: dict[str, str] = {}
        for f, cfg in configs:
            if key in cfg or key in _RUN_DEFAULTS:
                seen.setdefault(repr(norm(key, cfg.get(key, _RUN_DEFAULTS.get(key)))), str(f))
        if len(seen) > 1:
            return f"{key}: " + ", ".join(f"{v} in {f}" for v, f in seen.items())
    return ""


@app.command()
def compare(
    folders: Annotated[list[Path], typer.Argument(help="Result folders of memcurator bench.")],
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
    from rich.table import Table

    from memcurator.bench.compare import paired_differences, read_records
    from memcurator.bench.report import read_summary

    configs = []
    for f in folders:
        if not (f / "summary.json").exists():
            continue  # records.csv alone is enough; the per-task ids are still checked
        try:
            configs.append((f, read_summary(f)["config"]))
        except MemcuratorError as e:
            _fail(e)
    clash = _config_clash(configs)
    if clash:
        _fail(ValueError(f"the folders were run with different settings ({clash})"))
    try:
        rows = paired_differences(
            read_records(folders), baseline, outcome=outcome, subset=subset, n_boot=n_boot
        )
    except (MemcuratorError, FileNotFoundError) as e:
        _fail(e)
        return
    what = outcome + (f" on {subset} tasks" if subset else "")
    t = Table(title=f"{what}: each policy − {baseline}, paired by (seed, task)")
    for col in ("policy", "n", outcome, baseline, "Δ", "95% CI", "only policy", "only base", "p"):
        t.add_column(col, justify="right")
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
    Console(width=max(120, Console().width)).print(t)


@app.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Full specs as JSON.")] = False,
) -> None:
    """List the policy presets: each decision's component and a line on the preset."""
    from memcurator.policy import POLICIES, policy_spec

    if as_json:
        print(json.dumps({n: policy_spec(n) for n in sorted(POLICIES)}, indent=1))
        return
    width = max(len(n) for n in POLICIES)
    for name in sorted(POLICIES):
        spec = policy_spec(name)
        comps = []
        for d in ("admit", "form", "keep", "rank", "learn", "share"):
            v = spec.get(d)
            if d == "learn":
                if v:
                    comps.append("learn=" + "+".join(c["name"] for c in v))
            elif v:
                comps.append(f"{d}={v['name']}")
        unb = "" if spec.get("bounded", True) else " [unbounded in bench]"
        print(f"{name:{width}s} {spec.get('description', '')}{unb}")
        print(f"{'':{width}s}   {' '.join(comps)}")


register_store_commands(app)


if __name__ == "__main__":
    app()
