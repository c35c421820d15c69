"""The peer group over HTTP (bench --peers M --transport http): each agent its own process and
store, exchanging through a real ``memcurator serve`` hub on loopback, does what the in-process
group does; the wire bytes are counted."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from typer.testing import CliRunner  # noqa: E402

from memcurator.bench.hub_peers import HubServer, run_group_http  # noqa: E402
from memcurator.bench.peers import (  # noqa: E402
    PeerConfig,
    PeerRun,
    format_table,
    from_json,
    run_group,
    to_json,
)
from memcurator.bench.runner import load_families  # noqa: E402
from memcurator.bench.session import make_executor  # noqa: E402
from memcurator.client import Client  # noqa: E402
from memcurator.errors import RunsFailed  # noqa: E402

#: columns that measure time (or a cache hit), not a decision
TIMING = {"llm_s", "mem_s", "latency_s", "curator_s", "cached"}
SMALL = {"n_tasks": 20, "share_every": 4, "uplink": 3000, "outside_rate": 0.3, "n_families": 8}


def _norm(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def v(x: Any) -> Any:
        return "nan" if isinstance(x, float) and math.isnan(x) else x

    return [{k: v(x) for k, x in r.items() if k not in TIMING} for r in records]


@pytest.fixture(scope="module")
def families() -> list[Any]:
    return load_families(None, "sql")


@pytest.mark.parametrize("policy", ["curator", "lru"])
def test_http_group_reproduces_the_in_process_group(families: list[Any], policy: str) -> None:
    """Two agent processes through the hub: same records (less timing), same channel tallies,
    same decisions, same in-process uplink figure; the wire figures are measured and sane."""
    ex = make_executor("fake", env="sql", cache=False)
    cfg = PeerConfig(peers=2, seed=0, **SMALL)  # type: ignore[arg-type]
    acc0, det0 = run_group(policy, families, ex, cfg)
    acc1, det1 = run_group_http(policy, families, ex, cfg)
    assert acc1 == acc0
    assert len(det1["records"]) == 2 * cfg.n_tasks
    assert _norm(det1["records"]) == _norm(det0["records"])
    assert json.dumps(det1["channels"], sort_keys=True) == json.dumps(
        det0["channels"], sort_keys=True
    )
    assert det1["decisions"] == det0["decisions"]
    assert det1["rounds"] == det0["rounds"] == cfg.n_tasks // cfg.share_every
    # the exchange happened: the peer channel saw entries both ways
    assert det1["channels"]["peer"]["genuine_n"] > 0
    assert det1["uplink_bytes_per_round"] == det0["uplink_bytes_per_round"] > 0
    wire, head = det1["wire_bytes_per_round"], det1["wire_header_bytes_per_round"]
    # a push's JSON body is within a factor of the frames it replaces (no sender field per
    # entry, no length prefix; a response body added); headers are counted apart
    assert 0.5 * det0["uplink_bytes_per_round"] < wire < 2 * det0["uplink_bytes_per_round"] + 500
    assert 100 < head < 2000
    assert det1["wire_all_bytes_per_round"] >= wire
    assert det1["transport"] == "http"


class _Boom:
    """An executor that fails at the first task (picklable for the agent processes)."""

    def complete(self, *a: Any, **kw: Any) -> Any:
        raise RuntimeError("the model fell over")

    def __repr__(self) -> str:
        return "Boom()"


def test_a_failing_agent_stops_the_run_and_says_why(families: list[Any]) -> None:
    cfg = PeerConfig(peers=2, seed=0, **SMALL)  # type: ignore[arg-type]
    with pytest.raises(RunsFailed, match="agent0 failed: .*fell over"):
        run_group_http("lru", families, _Boom(), cfg)


def test_hub_server_starts_with_peer_keys_and_stops() -> None:
    with HubServer(["agent0", "agent1"]) as hub:
        url = hub.url
        port = int(url.rsplit(":", 1)[1])
        with Client(url, key=hub.tokens["agent0"]) as c:
            c.hub_push([], to="agent1", round=1)
        with Client(url, key=hub.tokens["agent1"]) as c:
            msgs, cur = c.hub_pull(0)
            assert [(s, r) for s, r, _ in msgs] == [("agent0", 1)] and cur == 1
            assert c.wire.requests == 1 and c.wire.body_received > 0
    with socket.socket() as s:  # nothing listens there any more
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_table_and_json_carry_the_wire_figures() -> None:
    base = dict(
        policy="curator", seed=0, peers=2, uplink=3000, accuracy=0.5, accuracy_isolated=0.4,
        uplink_bytes_per_round=500.0, rounds=5, tasks=20,
        channels={"peer": {"genuine_admitted": 1.0, "genuine_n": 1, "poison_admitted": 0.0,
                           "poison_n": 1, "asr": 0.0, "asr_n": 1, "asr_no_attack": 0.0}},
    )  # fmt: skip
    http = PeerRun(**base, transport="http", wire_bytes_per_round=612.0,  # type: ignore[arg-type]
                   wire_header_bytes_per_round=417.0, wire_all_bytes_per_round=9000.0)  # fmt: skip
    inproc = PeerRun(**base)  # type: ignore[arg-type]
    text = format_table([http])
    assert "uplink over HTTP" in text and "| 500 | 612 | 417 | 9000" in text
    assert "uplink over HTTP" not in format_table([inproc])
    back = from_json(json.loads(json.dumps(to_json([http])))[0])
    assert back.transport == "http" and back.wire_bytes_per_round == 612.0
    # a folder written before the hub existed still reads
    old = {k: v for k, v in to_json([inproc])[0].items() if k != "transport"}
    old = {k: v for k, v in old.items() if not k.startswith("wire_")}
    r = from_json(old)
    assert r.transport == "inproc" and math.isnan(r.wire_bytes_per_round)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--transport", "carrier-pigeon", "--peers", "2"], "unknown --transport"),
        (["--transport", "http"], "--transport is for a peer group"),
    ],
)
def test_bench_refuses_bad_transport(tmp_path: Path, args: list[str], message: str) -> None:
    from memcurator.cli import app

    r = CliRunner().invoke(
        app, ["bench", "--executor", "fake", "--tasks", "4", *args, "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 2 and message in r.output
    assert not (tmp_path / "o").exists()
