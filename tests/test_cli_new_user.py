"""What a new user met on the command line at 100 columns (issue 19, item 8), each a test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memcurator import Memory
from memcurator.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "100"}
LONG = (
    "Task: list the ten customers with the largest total order value in 2023, with their "
    "city\nAction: SELECT c.name, c.city, SUM(o.total) AS s FROM customers c JOIN orders o ON "
    "o.cid = c.id WHERE o.year = 2023 GROUP BY c.id ORDER BY s DESC LIMIT 10;"
)


def _flat(res: Any) -> str:
    return " ".join(res.output.split())


def test_policies_fit_100_columns() -> None:
    res = runner.invoke(app, ["policies"], env=WIDE)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(x) for x in lines) <= 100
    from memcurator.policy import POLICIES

    names = {x.split()[0] for x in lines if x.strip()}
    assert set(POLICIES) <= names  # every preset, its name whole on one line
    assert "[unbounded in bench]" in res.stdout  # kept as text, not read as markup


def test_entries_show_a_useful_excerpt(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    m = Memory(str(path), namespace="a", policy="keep-all")
    m.write(LONG)
    m.close()
    args = ["entries", str(path), "--namespace", "a"]
    res = runner.invoke(app, args, env=WIDE)
    assert res.exit_code == 0, res.output
    assert max(len(x) for x in res.stdout.splitlines()) <= 100
    shown = re.sub(r"\s+", "", res.stdout)
    assert re.sub(r"\s+", "", LONG.replace("\n", " ⏎ "))[:120] in shown  # not 28 characters
    assert "…" in res.stdout  # 160 characters by default, marked as cut
    full = runner.invoke(app, [*args, "--full"], env=WIDE)
    assert re.sub(r"\s+", "", LONG.replace("\n", " ⏎ ")) in re.sub(r"\s+", "", full.stdout)
    short = runner.invoke(app, [*args, "--width", "30"], env=WIDE)
    assert "Task:listthetencustomers…" in re.sub(r"\s+", "", short.stdout)


def _explained(term: str) -> bool:
    from memcurator.errors import UnknownName
    from memcurator.glossary import lookup

    try:
        lookup(term)
    except UnknownName:
        return False
    return True


def _printed_columns() -> set[str]:
    """Every column name compare, bench and report print (single agents, fronts, peer groups)."""
    from rich.console import Console

    from memcurator.bench import compare, measures
    from memcurator.bench.budget_fronts import BUDGET_AXES, print_front
    from memcurator.bench.peer_report import UPLINK_AXES
    from memcurator.bench.peers import format_table
    from memcurator.bench.render import headers_and_cells, to_csv

    cols = {*compare.COLUMNS, *compare.OUTCOMES, "keep-all"}
    row = {"policy": "p", "seeds": 1, "tasks": 3.0, "n_victim": 1.0}
    heads, _ = headers_and_cells([row])
    cols |= {h.split("\n")[0] for h in heads}
    cols |= {m.key for m in measures.MEASURES}
    csv_head = to_csv([row]).splitlines()[0].split(",")  # report --csv: key, key_sd, key_n
    cols |= {re.sub(r"_(sd|n)$", "", c) for c in csv_head}
    for axes in (BUDGET_AXES, UPLINK_AXES):
        con = Console(record=True, width=400)
        print_front([], con, axes)
        header = next(x for x in con.export_text().splitlines() if "policy" in x)
        cols |= {c.strip() for c in re.split(r"\s{2,}", header) if c.strip()}
    cols |= {c.strip() for c in format_table([]).split("|")}
    return cols - {"keep-all"}  # the baseline's column is named after the baseline policy


def test_every_printed_column_is_explained() -> None:
    cols = _printed_columns()
    assert {"local_ok", "Δ", "95% CI", "task acc [95% CI]", "acc (isolated)"} <= cols
    missing = sorted(c for c in cols if not _explained(c))
    assert not missing, f"memcurator explain does not know {missing}"
    res = runner.invoke(app, ["explain", "local_ok"])
    assert res.exit_code == 0 and "task accuracy" in res.output


def test_decisions_of_a_deleted_namespace_show_its_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    m = Memory(str(path), namespace="a", policy="keep-all")
    ids = [m.write(f"Task: note {i}\nAction: SELECT {i};").id for i in range(3)]
    m.close()
    res = runner.invoke(app, ["delete-namespace", str(path), "a", "--yes"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["decisions", str(path), "--namespace", "a", "--json"])
    assert res.exit_code == 0, res.output
    import json

    rows = [json.loads(x) for x in res.stdout.splitlines()]
    tombs = [r["entry_id"] for r in rows if r["action"] == "forget"]
    assert tombs == [*ids, ""]  # one per entry, then the namespace's own
    table = runner.invoke(app, ["decisions", str(path), "--namespace", "a"], env=WIDE)
    assert table.exit_code == 0 and "deleted" in table.stdout
    forget = runner.invoke(
        app, ["decisions", str(path), "--namespace", "a", "--action", "forget", "--json"]
    )
    assert len(forget.stdout.splitlines()) == 4
    never = runner.invoke(app, ["decisions", str(path), "--namespace", "zzz"])
    assert never.exit_code == 2 and "left no decision log" in _flat(never)


def test_a_second_import_reports_duplicates(tmp_path: Path) -> None:
    src = tmp_path / "src.sqlite"
    m = Memory(str(src), namespace="a", policy="keep-all")
    m.write("Task: count orders\nAction: SELECT COUNT(*) FROM orders;")
    m.write("Task: list members\nAction: SELECT * FROM members;")
    m.close()
    exp = tmp_path / "a.jsonl"
    assert (
        runner.invoke(app, ["export", str(src), "--namespace", "a", "--out", str(exp)]).exit_code
        == 0
    )
    dst = [
        "import",
        str(tmp_path / "d.sqlite"),
        str(exp),
        "--namespace",
        "b",
        "--policy",
        "keep-all",
    ]
    first = runner.invoke(app, dst)
    assert "2 admitted, 0 rejected" in _flat(first) and "duplicates" not in _flat(first)
    second = runner.invoke(app, dst)
    assert second.exit_code == 0, second.output
    assert "0 admitted, 0 rejected, 2 duplicates of resident entries" in _flat(second)
    assert len(Memory(str(tmp_path / "d.sqlite"), namespace="b", policy="keep-all")) == 2


def _corrupt_store(path: Path) -> None:
    m = Memory(str(path), namespace="a", policy="keep-all")
    for i in range(60):
        m.write(f"Task: request {i} " + "x" * 400 + f"\nAction: SELECT {i};")
    m.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 40_000
    for off in range(8192, len(data) - 4096, 4096):  # keep the header page, damage the rest
        data[off : off + 512] = b"\xa5" * 512
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "argv",
    [
        ["entries", "--namespace", "a"],
        ["decisions", "--namespace", "a"],
        ["namespaces"],
        ["export", "--namespace", "a"],
    ],
)
def test_a_damaged_store_gives_one_line(tmp_path: Path, argv: list[str]) -> None:
    path = tmp_path / "bad.sqlite"
    _corrupt_store(path)
    res = runner.invoke(app, [argv[0], str(path), *argv[1:]], env=WIDE)
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output
    assert res.output.startswith("error:") and len(res.output.strip().splitlines()) == 1


def test_a_library_error_in_any_command_is_one_line() -> None:
    """The guard sits on every registered command: an error raised inside becomes one line."""
    import typer

    from memcurator.cli_common import App
    from memcurator.errors import InvalidInput

    demo = App()

    @demo.command()
    def boom() -> None:
        """Raise."""
        raise InvalidInput("the budget must be positive, got [0]")

    @demo.command()
    def other() -> None:
        """Nothing."""

    res = runner.invoke(demo, ["boom"])
    assert res.exit_code == 2 and res.output == "error: the budget must be positive, got [0]\n"
    assert isinstance(typer.main.get_command(demo), object)
