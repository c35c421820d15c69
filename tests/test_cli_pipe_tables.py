"""No table the CLI prints to a pipe or a file cuts a number, an interval, an id or a header
(issue 31, item 5: the paired comparison table showed "+0.0…" / "[+0.…" without a terminal).

The kind: any rich table the CLI prints when standard output is not a terminal. Each command
runs with its output captured (not a terminal) and a narrow ``COLUMNS``, the narrowest case."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.cli import app

runner = CliRunner()
NARROW = {"COLUMNS": "40"}


def _run(*args: str) -> str:
    res = runner.invoke(app, list(args), env=NARROW)
    assert res.exit_code == 0, res.output
    return res.stdout


def _whole(out: str) -> None:
    assert "…" not in out, out


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("pipe") / "run"
    printed = _run(
        "bench", "--executor", "fake", "--tasks", "12", "--families", "6",
        "--policies", "keep-all,curator/channel-trust,no-memory", "--baseline", "no-memory",
        "--out", str(out),
    )  # fmt: skip
    return out, printed


def test_the_paired_table_of_bench_keeps_its_numbers(bench_out: tuple[Path, str]) -> None:
    _, printed = bench_out
    _whole(printed)
    assert re.search(r"\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]", printed)  # a whole 95% interval


def test_compare_keeps_its_numbers(bench_out: tuple[Path, str]) -> None:
    out, _ = bench_out
    printed = _run("compare", str(out), "--baseline", "no-memory")
    _whole(printed)
    assert re.search(r"[+-]\d\.\d{3} \│ \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]", printed)
    assert "only policy" in printed and "curator/channel-trust" in printed


def test_report_keeps_its_numbers(bench_out: tuple[Path, str]) -> None:
    out, _ = bench_out
    printed = _run("report", str(out))
    _whole(printed)
    assert "curator/channel-trust" in printed


def test_policies_keeps_names_and_components() -> None:
    printed = _run("policies")
    _whole(printed)
    assert "tokenworth/bytes-capacity" in printed


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = str(tmp_path_factory.mktemp("store") / "s.sqlite")
    mem = Memory(db, namespace="agent-with-a-rather-long-name", policy="lru", max_bytes=2500)
    for i in range(8):
        mem.write(
            f"Task: count the rows of table number {i} in the warehouse schema\n"
            f"Action: SELECT COUNT(*) FROM warehouse.table_number_{i};"
        )
    mem.close()
    return db


def test_entries_keep_whole_ids(store: str) -> None:
    printed = _run("entries", store, "--namespace", "agent-with-a-rather-long-name")
    _whole(printed)
    mem = Memory(store, namespace="agent-with-a-rather-long-name", policy="lru")
    assert all(m.id in printed for m in mem.entries())


def test_decisions_keep_whole_ids_and_reasons(store: str) -> None:
    printed = _run("decisions", store, "--namespace", "agent-with-a-rather-long-name")
    _whole(printed)
    mem = Memory(store, namespace="agent-with-a-rather-long-name", policy="lru")
    assert all(d.entry_id in printed for d in mem.decisions())


def test_namespaces_keep_whole_names(store: str) -> None:
    printed = _run("namespaces", store)
    _whole(printed)
    assert "agent-with-a-rather-long-name" in printed
