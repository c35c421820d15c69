"""Result folders that cannot lose or corrupt results: lock, atomic files, Ctrl-C, bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcurator.cli import app
from memcurator.files import LOCK_NAME, FolderLock, FolderLocked, atomic_open, atomic_write

runner = CliRunner()
FAST = ["bench", "--executor", "fake", "--tasks", "8", "--families", "4"]


def _flat(res: Any) -> str:
    return " ".join(res.output.split())


def _strict(text: str) -> Any:
    def bad(c: str) -> Any:
        raise ValueError(f"non-strict JSON constant {c}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture
def live_pid():  # type: ignore[no-untyped-def]
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _fake_lock(folder: Path, pid: int) -> None:
    import socket

    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK_NAME).write_text(
        json.dumps({"pid": pid, "host": socket.gethostname(), "what": "memcurator bench"})
    )


def test_second_bench_on_a_locked_folder_refuses(tmp_path: Path, live_pid: int) -> None:
    out = tmp_path / "conc"
    _fake_lock(out, live_pid)
    res = runner.invoke(app, [*FAST, "--policies", "lru", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert f"in use by another memcurator bench (pid {live_pid}" in _flat(res)
    assert not (out / "summary.json").exists()
    assert (out / LOCK_NAME).exists()  # the other process's lock is left alone


def test_two_real_benches_on_one_folder(tmp_path: Path) -> None:
    """Two processes at once: exactly one writes the folder, the other refuses."""
    out = tmp_path / "conc"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "memcurator.cli", *FAST, "--tasks", "40", "--out", str(out)]
    procs = [
        subprocess.Popen(
            [*cmd, "--policies", pols], env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE
        )
        for pols in ("curator,keep-all,lru", "recency,success-only")
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [o[1].decode()[-500:] for o in outs]
    errs = " ".join(o[1].decode() for o in outs)
    assert "in use by another memcurator bench" in " ".join(errs.split()) or (
        "already holds benchmark results" in " ".join(errs.split())
    )
    winner = procs[[p.returncode for p in procs].index(0)].args[-1]
    doc = json.loads((out / "summary.json").read_text())
    assert sorted({r["policy"] for r in doc["runs"]}) == sorted(winner.split(","))
    assert not (out / LOCK_NAME).exists()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path, dead_pid: int) -> None:
    out = tmp_path / "stale"
    _fake_lock(out, dead_pid)
    res = runner.invoke(app, [*FAST, "--policies", "lru", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "summary.json").read_text())["config"]["complete"] is True
    assert not (out / LOCK_NAME).exists()


def test_folder_lock_api(tmp_path: Path) -> None:
    with FolderLock(tmp_path / "f") as lock:
        assert lock.created_folder and (tmp_path / "f" / LOCK_NAME).exists()
        with pytest.raises(FolderLocked, match="in use"):
            FolderLock(tmp_path / "f").acquire()
    assert not (tmp_path / "f" / LOCK_NAME).exists()
    FolderLock(tmp_path / "f").acquire().release()  # free again


def test_atomic_open_keeps_the_old_file_on_interrupt(tmp_path: Path) -> None:
    p = atomic_write(tmp_path / "a.json", '{"old": 1}')
    with pytest.raises(KeyboardInterrupt), atomic_open(p) as f:
        f.write('{"new": ')
        raise KeyboardInterrupt
    assert p.read_text() == '{"old": 1}'
    assert [x.name for x in tmp_path.iterdir()] == ["a.json"]  # no temporary left behind


def test_plot_interrupted_mid_save_keeps_a_whole_png(tmp_path: Path, monkeypatch: Any) -> None:
    import matplotlib.figure

    from memcurator.bench.report import plot

    summary = [{"policy": "a", "seeds": 1, "peak_kb": 1.0, "accuracy": 0.5}]
    path = plot(tmp_path / "p.png", summary)
    before = path.read_bytes()
    real = matplotlib.figure.Figure.savefig

    def half(self: Any, fh: Any, **kw: Any) -> None:
        real(self, fh, **kw)
        fh.truncate(100)  # a half-written image ...
        raise KeyboardInterrupt  # ... and Ctrl-C

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half)
    with pytest.raises(KeyboardInterrupt):
        plot(path, summary)
    assert path.read_bytes() == before
    from PIL import Image  # matplotlib depends on pillow

    Image.open(path).verify()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["p.png"]


def _interrupting_run_bench(finish: int) -> Any:
    """A run_bench that finishes ``finish`` runs (saving each), then gets Ctrl-C."""
    from memcurator.bench import runner as runner_mod

    real = runner_mod.run_bench

    def fake(cfg: Any, ex: Any, **kw: Any) -> Any:
        on_run = kw.pop("on_run")
        done: list[Any] = []

        def count(runs: list[Any]) -> None:
            done[:] = runs
            on_run(runs)
            if len(runs) >= finish:
                raise KeyboardInterrupt

        if finish == 0:
            raise KeyboardInterrupt
        return real(cfg, ex, on_run=count, **kw)

    return fake


def test_interrupt_reports_the_runs_saved(tmp_path: Path, monkeypatch: Any) -> None:
    from memcurator.bench import runner as runner_mod

    monkeypatch.setattr(runner_mod, "run_bench", _interrupting_run_bench(1))
    out = tmp_path / "int"
    res = runner.invoke(app, [*FAST, "--policies", "lru,keep-all", "--out", str(out)])
    assert res.exit_code == 130
    assert "1 of 2 (policy, seed) runs were finished and are saved" in _flat(res)
    doc = json.loads((out / "summary.json").read_text())
    assert doc["config"]["runs_done"] == 1 and doc["config"]["complete"] is False
    assert not (out / LOCK_NAME).exists()


def test_interrupt_during_a_save_reads_the_count_on_disk(tmp_path: Path, monkeypatch: Any) -> None:
    """Ctrl-C inside the second save: the message says what summary.json holds (1 run)."""
    from memcurator.bench import report as report_mod

    real = report_mod.write_results
    calls = [0]

    def flaky(out: Path, runs: Any, summary: Any, config: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            atomic_write(out / "records.csv", "half")  # partly written, then Ctrl-C
            raise KeyboardInterrupt
        return real(out, runs, summary, config)

    monkeypatch.setattr(report_mod, "write_results", flaky)
    out = tmp_path / "int2"
    res = runner.invoke(app, [*FAST, "--policies", "lru,keep-all,recency", "--out", str(out)])
    assert res.exit_code == 130
    doc = json.loads((out / "summary.json").read_text())
    assert doc["config"]["runs_done"] == 1
    assert "1 of 3 (policy, seed) runs were finished" in _flat(res)


def test_interrupt_before_any_run_says_nothing_was_saved(tmp_path: Path, monkeypatch: Any) -> None:
    from memcurator.bench import runner as runner_mod

    monkeypatch.setattr(runner_mod, "run_bench", _interrupting_run_bench(0))
    out = tmp_path / "int0"
    res = runner.invoke(app, [*FAST, "--policies", "lru,keep-all", "--out", str(out)])
    assert res.exit_code == 130
    assert "nothing was saved" in _flat(res) and "was not created" in _flat(res)
    assert "0 of 2" not in _flat(res)
    assert not out.exists()


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("r") / "one"
    res = runner.invoke(app, [*FAST, "--policies", "lru,keep-all", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _bad_summaries(tmp: Path) -> dict[str, Path]:
    cases = {}
    d = tmp / "dir"
    (d / "summary.json").mkdir(parents=True)
    cases["a folder"] = d
    d = tmp / "latin1"
    d.mkdir()
    (d / "summary.json").write_bytes(b'{"runs": ["caf\xe9"]}')
    cases["not UTF-8"] = d
    d = tmp / "trunc"
    d.mkdir()
    (d / "summary.json").write_text('{"config": {"tasks": 8}, "runs": [{"pol')
    cases["truncated"] = d
    d = tmp / "list"
    d.mkdir()
    (d / "summary.json").write_text("[1, 2]")
    cases["not an object"] = d
    d = tmp / "runless"
    d.mkdir()
    (d / "summary.json").write_text('{"runs": [{"policy": "x"}]}')
    cases["a run without seed"] = d
    return cases


@pytest.mark.parametrize("cmd", ["report", "compare"])
def test_unreadable_summaries_give_one_line(tmp_path: Path, cmd: str) -> None:
    for what, folder in _bad_summaries(tmp_path).items():
        res = runner.invoke(app, [cmd, str(folder)])
        assert res.exit_code == 2, (what, res.output)
        assert "not a memcurator bench summary" in _flat(res), (what, res.output)
        assert "Traceback" not in res.output and res.output.count("error:") == 1, what


def test_unreadable_records_give_one_line(one_run: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(one_run, bad)
    (bad / "records.csv").write_bytes(b"policy,seed,step\n\xff\xfe,0,0\n")
    res = runner.invoke(app, ["compare", str(bad), "--baseline", "keep-all"])
    assert res.exit_code == 2 and "not a memcurator bench records file" in _flat(res)


def test_every_json_written_is_strict(one_run: Path, tmp_path: Path) -> None:
    _strict((one_run / "summary.json").read_text())
    res = runner.invoke(app, ["report", str(one_run), "--json"])
    assert res.exit_code == 0, res.output
    doc = _strict(res.stdout)
    assert {r["policy"] for r in doc["rows"]} == {"lru", "keep-all"}
    m = tmp_path / "merged"
    assert runner.invoke(app, ["report", str(one_run), "--out", str(m)]).exit_code == 0
    _strict((m / "summary.json").read_text())


def test_decisions_json_is_strict_with_missing_scores(tmp_path: Path) -> None:
    from memcurator import Memory

    path = tmp_path / "m.sqlite"
    mem = Memory(str(path), policy="keep-all")
    mem.write("Task: count rows\nAction: SELECT COUNT(*) FROM t;")
    mem.write("Task: count rows\nAction: SELECT COUNT(*) FROM t;")  # reinforce: no score (NaN)
    mem.close()
    res = runner.invoke(app, ["decisions", str(path), "--namespace", "default", "--json"])
    assert res.exit_code == 0, res.output
    rows = [_strict(line) for line in res.stdout.splitlines()]
    assert [r["action"] for r in rows] == ["admit", "reinforce"]
    assert rows[1]["score"] is None
    res = runner.invoke(app, ["entries", str(path), "--namespace", "default", "--json"])
    assert [_strict(line)["reinforcement"] for line in res.stdout.splitlines()] == [1]


def test_families_beyond_the_data_are_clamped_with_a_warning(tmp_path: Path) -> None:
    from memcurator.bench.runner import load_families

    n = len(load_families())
    out = tmp_path / "fam"
    res = runner.invoke(
        app, [*FAST, "--families", "100000", "--policies", "lru", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert f"--families 100000 is more than the {n} variant families in the data; using {n}" in (
        _flat(res)
    )
    assert json.loads((out / "summary.json").read_text())["config"]["families"] == n


def test_budget_below_one_entry_warns(tmp_path: Path) -> None:
    res = runner.invoke(
        app, [*FAST, "--max-bytes", "10", "--policies", "lru", "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 0, res.output
    assert "bounded policies (curator, lru, ...) will hold nothing" in _flat(res)
    ok = runner.invoke(app, [*FAST, "--policies", "lru", "--out", str(tmp_path / "c")])
    assert "will hold nothing" not in _flat(ok)
