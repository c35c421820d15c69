"""Running ``memcurator bench`` with the scripted executor from a test (the CLI in-process)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from memcurator.cli import app


def fake_bench(out: Path, *options: str, tasks: int = 12) -> str:
    """``memcurator bench --executor fake --tasks TASKS OPTIONS... --out OUT``; asserts that it
    exits 0 and returns its output."""
    res = CliRunner().invoke(
        app, ["bench", "--executor", "fake", "--tasks", str(tasks), *options, "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    return res.output
