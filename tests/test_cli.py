"""The command line: bench with the scripted executor, partial results, report merging."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _bench_util import fake_bench
from typer.testing import CliRunner

from memcurator.cli import app

runner = CliRunner()


def _bench(out: Path, *extra: str) -> str:
    return fake_bench(out, "--families", "6", "--policies", "keep-all,no-memory", *extra)


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bench")
    _bench(base / "s0", "--seed-start", "0")
    _bench(base / "s1", "--seed-start", "1")
    return base / "s0", base / "s1"


def test_bench_writes_complete_results(two_seeds: tuple[Path, Path]) -> None:
    s0, _ = two_seeds
    doc = json.loads((s0 / "summary.json").read_text())
    assert doc["config"]["complete"] is True
    assert doc["config"]["runs_done"] == 2
    assert [(r["policy"], r["seed"], r["tasks"]) for r in doc["runs"]] == [
        ("keep-all", 0, 12),
        ("no-memory", 0, 12),
    ]
    for png in ("accuracy_vs_bytes.png", "accuracy_over_time.png"):
        assert (s0 / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header = (s0 / "records.csv").read_text().splitlines()[0]
    assert header.startswith("policy,seed,step,task_id")


def test_bench_prints_plain_progress_without_a_terminal(tmp_path: Path) -> None:
    out = _bench(tmp_path / "p", "--tasks", "10")
    assert "keep-all seed 0: 1/10 tasks" in out
    assert "no-memory seed 0: 10/10 tasks" in out


def test_run_bench_reports_each_finished_run() -> None:
    from memcurator.bench.agent import copy_first_action
    from memcurator.bench.runner import BenchConfig, load_families, run_bench
    from memcurator.bench.stream import StreamConfig
    from memcurator.llm import create_executor

    cfg = BenchConfig(
        policies=["keep-all", "lru"],
        seeds=[0, 1],
        stream=StreamConfig(n_tasks=8, n_families=4),
    )
    seen: list[list[tuple[str, int]]] = []
    ex = create_executor("fake", responder=copy_first_action)
    runs = run_bench(
        cfg,
        ex,
        families=load_families(),
        on_run=lambda d: seen.append([(r.policy, r.seed) for r in d]),
    )
    assert [len(s) for s in seen] == [1, 2, 3, 4]
    assert seen[-1] == [(r.policy, r.seed) for r in runs]
    assert seen[1] == [("keep-all", 0), ("lru", 0)]


def test_report_merges_seeds(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, s1 = two_seeds
    res = runner.invoke(app, ["report", str(s0), str(s1), "--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert sorted((r["policy"], r["seed"]) for r in doc["runs"]) == [
        ("keep-all", 0),
        ("keep-all", 1),
        ("no-memory", 0),
        ("no-memory", 1),
    ]
    assert {row["policy"]: row["seeds"] for row in doc["summary"]} == {
        "keep-all": 2,
        "no-memory": 2,
    }
    assert (tmp_path / "m" / "summary.md").read_text().startswith("| policy")
    assert "partial" not in res.output


def test_report_flags_partial_folders(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, _ = two_seeds
    part = tmp_path / "part"
    part.mkdir()
    doc = json.loads((s0 / "summary.json").read_text())
    doc["config"].update(complete=False, runs_done=1)
    doc["runs"] = doc["runs"][:1]
    (part / "summary.json").write_text(json.dumps(doc))
    res = runner.invoke(app, ["report", str(part)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps long lines
    assert "partial folders" in text and "part (1 runs finished)" in text


def test_report_refuses_streams_of_different_lengths(
    two_seeds: tuple[Path, Path], tmp_path: Path
) -> None:
    s0, _ = two_seeds
    other = tmp_path / "short"
    _bench(other, "--tasks", "6")
    res = runner.invoke(app, ["report", str(s0), str(other)])
    assert res.exit_code != 0
    assert "different settings (tasks: 12 in" in " ".join(res.output.split())


def test_report_missing_folder(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code != 0
    assert "no summary.json" in " ".join(res.output.split())


def test_policies_lists_the_registry() -> None:
    res = runner.invoke(app, ["policies"])
    assert res.exit_code == 0
    names = res.output.split()
    assert {"curator", "keep-all", "tokenworth", "curator+worth"} <= set(names)


def test_compare_pairs_tasks(two_seeds: tuple[Path, Path]) -> None:
    s0, s1 = two_seeds
    res = runner.invoke(app, ["compare", str(s0), str(s1), "--baseline", "keep-all"])
    assert res.exit_code == 0, res.output
    assert "no-memory" in res.output and "24" in res.output  # 12 tasks x 2 seeds paired
    bad = runner.invoke(app, ["compare", str(s0), "--baseline", "curator"])
    assert bad.exit_code != 0
    assert "no records of baseline 'curator'" in " ".join(bad.output.split())


def _flat(res) -> str:  # type: ignore[no-untyped-def]
    return " ".join(res.output.split())  # rich wraps long lines


def test_report_refuses_other_settings(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, _ = two_seeds
    other = tmp_path / "b50k"
    _bench(other, "--max-bytes", "50000", "--seed-start", "1")
    res = runner.invoke(app, ["report", str(s0), str(other)])
    assert res.exit_code != 0
    assert "different settings (max_bytes: 100000 in" in _flat(res)
    cmp = runner.invoke(app, ["compare", str(s0), str(other)])
    assert cmp.exit_code != 0 and "different settings" in _flat(cmp)


def test_report_out_is_a_complete_folder(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, s1 = two_seeds
    m = tmp_path / "m"
    assert runner.invoke(app, ["report", str(s0), str(s1), "--out", str(m)]).exit_code == 0
    doc = json.loads((m / "summary.json").read_text())
    assert doc["config"]["tasks"] == 12 and doc["config"]["complete"] is True
    assert len((m / "records.csv").read_text().splitlines()) == 1 + 2 * 2 * 12
    assert (m / "accuracy_over_time.png").stat().st_size > 1000
    res = runner.invoke(app, ["compare", str(m), "--baseline", "no-memory"])
    assert res.exit_code == 0, res.output
    # the merged folder merges again with its sources (same settings)
    assert runner.invoke(app, ["report", str(m), str(s0)]).exit_code == 0


def test_report_will_not_overwrite_an_input(two_seeds: tuple[Path, Path]) -> None:
    s0, s1 = two_seeds
    before = (s0 / "summary.json").read_text()
    res = runner.invoke(app, ["report", str(s0), str(s1), "--out", str(s0)])
    assert res.exit_code != 0 and "one of the merged folders" in _flat(res)
    assert (s0 / "summary.json").read_text() == before


def test_report_corrupt_summary(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{not json")
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "not a memcurator bench summary" in _flat(res)


def test_bench_keeps_existing_results(two_seeds: tuple[Path, Path], tmp_path: Path) -> None:
    s0, _ = two_seeds
    before = (s0 / "records.csv").read_text()
    res = runner.invoke(app, ["bench", "--executor", "fake", "--policies", "lru", "--out", str(s0)])
    assert res.exit_code == 2 and "--overwrite" in _flat(res)
    assert (s0 / "records.csv").read_text() == before
    f = tmp_path / "file.txt"
    f.write_text("x")
    res = runner.invoke(app, ["bench", "--executor", "fake", "--out", str(f)])
    assert res.exit_code == 2 and "is a file" in _flat(res)
    out = tmp_path / "again"
    _bench(out, "--tasks", "4")
    _bench(out, "--tasks", "5", "--overwrite")
    assert json.loads((out / "summary.json").read_text())["config"]["tasks"] == 5


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--policies", "lru,lru"], "policies listed twice"),
        (["--zipf", "nan"], "zipf must be a finite number"),
    ],
)
def test_bench_rejects_bad_options(tmp_path: Path, args: list[str], msg: str) -> None:
    res = runner.invoke(app, ["bench", "--executor", "fake", "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and msg in _flat(res)
    assert not (tmp_path / "o").exists()


def test_bench_budget_below_one_entry_logs_rejects(tmp_path: Path) -> None:
    """Every entry (2 KB of embedding alone) exceeds a 1,000-byte budget: refused, run goes on."""
    out = _bench(
        tmp_path / "tiny", "--max-bytes", "1000", "--tasks", "6", "--policies", "lru,curator"
    )
    doc = json.loads((tmp_path / "tiny" / "summary.json").read_text())
    for run in doc["runs"]:  # keep-all is unbounded by design, so budgeted policies only
        assert run["peak_kb"] == 0.0 and run["final_entries"] == 0, run["policy"]
        assert run["decisions"].get("reject", 0) >= 6, run["decisions"]
    assert "wrote" in out


def test_compare_rejects_bad_subset_and_lone_baseline(two_seeds: tuple[Path, Path]) -> None:
    s0, _ = two_seeds
    res = runner.invoke(app, ["compare", str(s0), "--subset", "bogus"])
    assert res.exit_code == 2 and "unknown subset 'bogus'" in _flat(res)
    res = runner.invoke(app, ["compare", str(s0), "--baseline", "keep-all", "--subset", "clean"])
    assert res.exit_code == 0, res.output


def test_store_commands_only_read(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "other.sqlite"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    ns = ("--namespace", "default")  # store commands require one (issue 9)
    for cmd in ("decisions", "entries"):
        res = runner.invoke(app, [cmd, str(other), *ns])
        assert res.exit_code == 2 and "not a memcurator store" in _flat(res), res.output
        res = runner.invoke(app, [cmd, str(tmp_path), *ns])
        assert res.exit_code == 2 and "directory" in _flat(res)
        readme = tmp_path / "README.md"
        readme.write_text("# hello\n")
        res = runner.invoke(app, [cmd, str(readme), *ns])
        assert res.exit_code == 2 and "not an SQLite database" in _flat(res)
    c = sqlite3.connect(other)
    assert c.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_decisions_unknown_action(tmp_path: Path) -> None:
    from memcurator import Memory

    path = tmp_path / "m.sqlite"
    m = Memory(path, policy="keep-all", max_bytes=100_000)
    m.write("SELECT 1;  -- a remembered query")
    m.close()
    res = runner.invoke(
        app, ["decisions", str(path), "--namespace", "default", "--action", "admit"]
    )
    assert res.exit_code == 0 and "admit" in res.output
    res = runner.invoke(
        app, ["decisions", str(path), "--namespace", "default", "--action", "bogus"]
    )
    assert res.exit_code == 2 and "unknown action 'bogus'" in _flat(res)


def test_plot_over_time_rejects_bad_input(tmp_path: Path) -> None:
    from memcurator.bench.report import plot_over_time
    from memcurator.errors import InvalidInput

    with pytest.raises(InvalidInput, match="no records"):
        plot_over_time(tmp_path / "x.png", [])
    row = {"policy": "a", "seed": "0", "step": "0", "local_ok": "True", "subset": "clean"}
    with pytest.raises(InvalidInput, match="window"):
        plot_over_time(tmp_path / "x.png", [row], window=0)
    assert plot_over_time(tmp_path / "x.png", [row], window=5).exists()


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every registered command of a click group, sub-groups included, as argv prefixes."""
    out: list[tuple[str, ...]] = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*prefix, name))
        if hasattr(cmd, "commands"):  # a sub-app
            out += _commands(cmd, (*prefix, name))
    return out


def test_every_registered_command_has_help() -> None:
    import typer

    cmds = _commands(typer.main.get_command(app))
    assert len(cmds) >= 13 and ("bench",) in cmds and ("delete-namespace",) in cmds
    for argv in cmds:
        res = runner.invoke(app, [*argv, "--help"])
        assert res.exit_code == 0 and "Usage" in res.output, argv
        doc = res.output.split("Usage", 1)[1]
        assert len(doc.split()) > 8, f"{argv} has no help text"


def test_the_cli_modules_do_not_import_each_other() -> None:
    import ast

    root = Path(__file__).resolve().parents[1] / "memcurator"
    for mod in ("cli", "cli_peers", "cli_results", "cli_store", "cli_common"):
        tree = ast.parse((root / f"{mod}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        others = {f"memcurator.{m}" for m in ("cli", "cli_peers")} - {f"memcurator.{mod}"}
        if mod == "cli":
            others -= {"memcurator.cli_peers"}  # the command calls into the peer half
        assert not imported & others, (mod, imported & others)


def test_interrupted_bench_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the first run names --resume; the resumed folder equals a whole run's."""
    from memcurator.bench import runner as runner_mod

    whole = tmp_path / "whole"
    _bench(whole, "--policies", "keep-all,lru,no-memory")
    real = runner_mod.run_bench

    def stop_after_one(cfg: Any, ex: Any, **kw: Any) -> Any:
        on_run = kw.pop("on_run")

        def save(runs: Any) -> None:
            on_run(runs)
            raise KeyboardInterrupt

        return real(cfg, ex, on_run=save, **kw)

    cut = tmp_path / "cut"
    args = ["bench", "--executor", "fake", "--tasks", "12", "--families", "6", "--out", str(cut)]
    monkeypatch.setattr(runner_mod, "run_bench", stop_after_one)
    res = runner.invoke(app, [*args, "--policies", "keep-all,lru,no-memory"])
    assert res.exit_code == 130 and "with --resume to finish it" in _flat(res)
    monkeypatch.setattr(runner_mod, "run_bench", real)
    again = runner.invoke(app, [*args, "--policies", "keep-all,lru,no-memory"])
    assert again.exit_code == 2 and "--resume" in _flat(again)
    clash = runner.invoke(app, [*args, "--policies", "keep-all,lru", "--tasks", "6", "--resume"])
    assert clash.exit_code == 2 and "other settings (tasks: 12" in _flat(clash)
    res = runner.invoke(app, [*args, "--policies", "keep-all,lru,no-memory", "--resume"])
    assert res.exit_code == 0, res.output
    assert "keep-all seed 0: 12/12" not in res.output  # the finished run was kept, not rerun

    def rows(folder: Path) -> list[dict[str, str]]:
        import csv

        with (folder / "records.csv").open(newline="") as f:
            return [
                {k: v for k, v in r.items() if k not in ("mem_s", "llm_s", "cached")}
                for r in csv.DictReader(f)
            ]

    assert rows(cut) == rows(whole)
    doc = json.loads((cut / "summary.json").read_text())
    assert doc["config"]["complete"] is True and doc["config"]["runs_done"] == 3
    both = runner.invoke(app, [*args, "--resume", "--overwrite"])
    assert both.exit_code == 2 and "choose one of --resume" in _flat(both)


def test_bench_pairs_each_policy_with_keep_all_after_the_table(tmp_path: Path) -> None:
    out = _bench(tmp_path / "pair", "--tasks", "10")
    assert "each policy − keep-all, paired by (seed, task)" in out
    assert "no-memory" in out.split("paired by (seed, task)")[1]
    # another baseline among the policies, or none
    out = _bench(tmp_path / "pair2", "--tasks", "10", "--baseline", "no-memory")
    assert "each policy − no-memory" in out
    out = _bench(tmp_path / "pair3", "--tasks", "10", "--baseline", "")
    assert "paired by" not in out


def test_bench_refuses_a_baseline_that_does_not_run(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["bench", "--executor", "fake", "--tasks", "5", "--policies", "lru,no-memory",
         "--baseline", "keep-all", "--out", str(tmp_path / "x")],
    )  # fmt: skip
    assert res.exit_code != 0
    assert "not among --policies" in res.output
    assert not (tmp_path / "x" / "records.csv").exists()
