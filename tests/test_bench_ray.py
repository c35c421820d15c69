"""``bench --ray``: the runs of a bench as Ray tasks give the records a sequential bench gives,
share the completion cache safely, and survive a worker that dies (issue 20, item 5).

One local Ray (2 CPUs, an 80 MB object store, loopback only, no dashboard, no token written to
the home folder) serves the whole module and is shut down after it.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from _proc_util import free_port  # noqa: E402

from memcurator.bench.distributed import RayOptions, run_cell  # noqa: E402
from memcurator.bench.runner import BenchConfig, load_families  # noqa: E402
from memcurator.bench.session import (  # noqa: E402
    bench_settings,
    make_executor,
    run_to_folder,
    saved_runs,
)
from memcurator.bench.stream import StreamConfig  # noqa: E402
from memcurator.errors import RunsFailed  # noqa: E402

TIMING = ("mem_s", "llm_s", "wall_s", "cached")


INIT = {"num_cpus": 2, "object_store_memory": 80 * 1024 * 1024}


@pytest.fixture(scope="module", autouse=True)
def _ray_env() -> Any:
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # a loopback test Ray
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield
    if ray.is_initialized():
        ray.shutdown()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def local_ray() -> Any:
    """The module's local Ray (started by the first test that needs it, shut down after the
    module)."""
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1", **INIT)
    # the test module's cell wrappers travel by value (the workers cannot import tests/)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray


def _cfg() -> BenchConfig:
    # 2 bounded policies x 2 seeds x 2 budgets = 8 runs
    return BenchConfig(
        policies=["lru", "curator"],
        seeds=[0, 1],
        stream=StreamConfig(n_tasks=12, n_families=4),
        sweep_values=[20_000, 60_000],
    )


def _records(folder: Path) -> list[dict[str, str]]:
    with (folder / "records.csv").open(newline="") as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same sweep without Ray."""
    cfg, ex = _cfg(), make_executor("fake")
    out = tmp_path_factory.mktemp("seq")
    run_to_folder(cfg, ex, load_families(), out, bench_settings(cfg, ex))
    return out


def _ray_opts(**kw: Any) -> RayOptions:
    return RayOptions(None, functools.partial(make_executor, "fake"), **kw)


def test_a_ray_sweep_gives_the_sequential_records(
    local_ray: Any, sequential: Path, tmp_path: Path
) -> None:
    cfg, ex = _cfg(), make_executor("fake")
    out = tmp_path / "ray"
    runs, _ = run_to_folder(cfg, ex, load_families(), out, bench_settings(cfg, ex), ray=_ray_opts())
    assert len(runs) == 8
    assert _records(out) == _records(sequential)
    assert len(_records(out)) == 8 * 12
    doc = json.loads((out / "summary.json").read_text())
    assert doc["config"]["complete"] is True and doc["config"]["runs_done"] == 8


def die_once(marker: str, victim: str, *args: Any) -> Any:
    """Run a cell, but kill this worker process the first time ``victim``'s cell starts."""
    if args[1] == victim and not os.path.exists(marker):
        Path(marker).write_text("died once\n")
        os._exit(1)  # as a killed worker: no exception, the process is gone
    return run_cell(*args)


def _dying(tmp_path: Path, victim: str) -> tuple[Any, Any, Path, Any, Path]:
    """The sweep's config and executor, the marker file, a cell function that kills its worker
    the first time ``victim``'s cell starts (:func:`die_once`), and the results folder."""
    marker = tmp_path / "died"
    cell = functools.partial(die_once, str(marker), victim)
    return _cfg(), make_executor("fake"), marker, cell, tmp_path / "ray"


def test_a_cell_whose_worker_dies_is_run_again(
    local_ray: Any, sequential: Path, tmp_path: Path
) -> None:
    cfg, ex, marker, cell, out = _dying(tmp_path, "curator@20k")
    run_to_folder(
        cfg, ex, load_families(), out, bench_settings(cfg, ex),
        ray=_ray_opts(max_retries=1, cell=cell),
    )  # fmt: skip
    assert marker.exists()  # the worker did die once
    assert _records(out) == _records(sequential)


def test_a_sweep_whose_worker_keeps_dying_is_saved_and_resumed(
    local_ray: Any, sequential: Path, tmp_path: Path
) -> None:
    cfg, ex, marker, cell, out = _dying(tmp_path, "lru@60k")
    settings = bench_settings(cfg, ex)
    with pytest.raises(RunsFailed, match="lru@60k seed 0.*--resume"):
        run_to_folder(
            cfg, ex, load_families(), out, settings, ray=_ray_opts(max_retries=0, cell=cell)
        )
    # every other run finished and is in the folder
    kept = {(r.policy, r.seed) for r in saved_runs(out)}
    assert ("lru@60k", 0) not in kept and len(kept) == 7
    assert json.loads((out / "summary.json").read_text())["config"]["complete"] is False
    # --resume runs only the missing one (here with Ray, the marker now lets it through)
    ran: list[str] = []

    def progress(label: str, n: int) -> Any:
        ran.append(label)
        return lambda: None

    run_to_folder(
        cfg, ex, load_families(), out, settings, resume=True, progress=progress,
        ray=_ray_opts(cell=cell),
    )  # fmt: skip
    assert ran == ["lru@60k seed 0"]
    assert _records(out) == _records(sequential)


def test_a_ray_started_for_the_bench_is_shut_down_after_it(
    sequential: Path, tmp_path: Path
) -> None:
    if ray.is_initialized():
        ray.shutdown()  # the module's Ray; the next test that needs it starts it again
    cfg, ex = _cfg(), make_executor("fake")
    out = tmp_path / "own"
    run_to_folder(
        cfg, ex, load_families(), out, bench_settings(cfg, ex), ray=_ray_opts(init=dict(INIT))
    )
    assert not ray.is_initialized()
    assert _records(out) == _records(sequential)


def _hammer(path: str, worker: int) -> tuple[int, int]:
    from memcurator.llm import CachedExecutor
    from memcurator.llm.fake import ScriptedExecutor

    ex = CachedExecutor(ScriptedExecutor(lambda p: p.upper()), path)
    for i in range(150):
        c = ex.complete(f"prompt {(i * (worker + 1)) % 60}")
        assert c.text == f"PROMPT {(i * (worker + 1)) % 60}"
    ex.close()
    return ex.hits, ex.misses


def test_ray_workers_share_one_completion_cache(local_ray: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "cache" / "completions.sqlite")  # created by the first worker
    task = ray.remote(_hammer)
    got = ray.get([task.remote(path, w) for w in range(4)])
    hits = sum(h for h, _ in got)
    misses = sum(m for _, m in got)
    assert hits + misses == 600
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 60
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # two workers may both miss the same prompt at once; INSERT OR IGNORE keeps one row
    assert 60 <= misses < 600


def test_the_cli_runs_a_bench_on_ray(local_ray: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memcurator.cli import app

    out = tmp_path / "cli"
    args = ["bench", "--executor", "fake", "--policies", "lru,keep-all", "--tasks", "6",
            "--families", "4", "--poison", "0", "--out", str(out), "--ray", "local"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = _records(out)
    assert len(rows) == 12 and {x["policy"] for x in rows} == {"lru", "keep-all"}
    seq = tmp_path / "seq"
    r = CliRunner().invoke(app, [*args[:-3], str(seq)])
    assert r.exit_code == 0, r.output
    assert _records(seq) == rows


def test_a_bench_runs_on_a_ray_cluster_by_its_address(tmp_path: Path) -> None:
    """``--ray ADDRESS``: a Ray head started apart (``ray start --head``, as on a cluster's head
    node, here on loopback) runs the cells; the records equal a bench without Ray, and the
    bench leaves the cluster running (it did not start it)."""
    import subprocess
    import time

    if ray.is_initialized():
        ray.shutdown()  # the module's in-process Ray; the next test that needs it starts it again
    exe = Path(sys.executable).parent
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = free_port()
    head = [str(exe / "ray"), "start", "--head", "--port", str(port),
            "--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--include-dashboard", "false",
            "--object-store-memory", str(80 * 1024 * 1024), "--disable-usage-stats"]  # fmt: skip
    started = subprocess.run(head, env=env, capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        args = ["bench", "--executor", "fake", "--policies", "lru,curator", "--tasks", "8",
                "--families", "4", "--poison", "0", "--seeds", "2"]  # fmt: skip
        cli = [str(exe / "memcurator"), *args]
        on_ray = subprocess.run(
            [*cli, "--out", str(tmp_path / "cluster"), "--ray", f"127.0.0.1:{port}"],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert on_ray.returncode == 0, on_ray.stdout[-3000:] + on_ray.stderr[-3000:]
        alone = subprocess.run(
            [*cli, "--out", str(tmp_path / "alone")], env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
        rows = _records(tmp_path / "cluster")
        assert len(rows) == 2 * 2 * 8 and {r["seed"] for r in rows} == {"0", "1"}
        assert rows == _records(tmp_path / "alone")
        # the cluster is still up after the bench: a bench does not stop a Ray it did not start
        st = subprocess.run(
            [str(exe / "ray"), "status", "--address", f"127.0.0.1:{port}"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert st.returncode == 0, st.stdout + st.stderr
    finally:
        subprocess.run([str(exe / "ray"), "stop", "--force"], env=env, capture_output=True,
                       timeout=120)  # fmt: skip
        time.sleep(1)
