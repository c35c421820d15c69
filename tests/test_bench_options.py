"""The option combinations of ``memcurator bench`` as the bench package's config validation
(issue 31: ``cli.bench`` is a thin shell; the checks live in :mod:`memcurator.bench.options`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcurator import cli
from memcurator.bench.options import (
    DEFAULT_POLICIES,
    OS_DEFAULT_POLICIES,
    BenchOptions,
    paired_baseline,
)
from memcurator.errors import InvalidInput


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (BenchOptions(env="web"), "unknown env 'web'; known: ['os', 'sql']"),
        (BenchOptions(resume=True, overwrite=True), "choose one of --resume"),
        (BenchOptions(resume=True, peers=4), "--resume is for single-agent benches"),
        (BenchOptions(transport="grpc", peers=4), "unknown --transport 'grpc'"),
        (BenchOptions(transport="http"), "--transport is for a peer group"),
        (BenchOptions(payloads="all"), "--payloads is for a peer group"),
        (BenchOptions(ray="local", peers=2), "--ray is for single-agent benches"),
    ],
)
def test_options_that_do_not_go_together_are_refused(opts: BenchOptions, message: str) -> None:
    with pytest.raises(InvalidInput) as e:
        opts.resolve()
    assert str(e.value).startswith(message)


def test_an_out_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "results"
    f.write_text("x")
    with pytest.raises(InvalidInput, match="is a file, not a folder"):
        BenchOptions(out=f).resolve()
    assert BenchOptions(out=tmp_path).resolve().out == tmp_path


def test_every_conflict_is_listed_in_order() -> None:
    opts = BenchOptions(resume=True, overwrite=True, transport="http", payloads="new")
    assert [m.split(" ")[0] for m in opts.conflicts()] == ["choose", "--transport", "--payloads"]
    assert BenchOptions(peers=4, transport="http", payloads="all").conflicts() == []


def test_defaults_follow_the_environment_and_explicit_values_stay() -> None:
    sql = BenchOptions().resolve()
    assert (sql.policies, sql.payload, sql.drift) == (DEFAULT_POLICIES, "drop", 0.3)
    assert sql.out is not None and sql.out.parent == Path("results")
    mine = BenchOptions(policies="lru", payload="comment", drift=0.0, out=Path("r")).resolve()
    assert (mine.policies, mine.payload, mine.drift, mine.out) == ("lru", "comment", 0.0, Path("r"))


def test_the_cli_help_names_the_same_defaults() -> None:
    # cli.py keeps literals so that `memcurator --help` imports no benchmark module
    assert (cli.DEFAULT_POLICIES, cli.OS_DEFAULT_POLICIES) == (
        DEFAULT_POLICIES,
        OS_DEFAULT_POLICIES,
    )


@pytest.mark.parametrize(
    ("baseline", "policies", "paired"),
    [
        (None, ["curator", "keep-all"], "keep-all"),
        (None, ["curator", "lru"], ""),
        ("", ["curator", "keep-all"], ""),
        ("lru", ["curator", "lru"], "lru"),
    ],
)
def test_the_paired_baseline(baseline: str | None, policies: list[str], paired: str) -> None:
    assert paired_baseline(baseline, policies) == paired


def test_a_baseline_that_did_not_run_is_refused_by_the_cli(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"--baseline 'mru' is not among --policies lru,fifo"):
        paired_baseline("mru", ["lru", "fifo"])
    res = CliRunner().invoke(
        cli.app, ["bench", "--transport", "http", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and "--transport is for a peer group (--peers M)" in res.output
