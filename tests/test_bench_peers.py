"""The peer-group benchmark (bench --peers): transport, wire format, and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcurator.bench.peers import LoopbackLink, PeerConfig, decode, encode
from memcurator.cli import app
from memcurator.errors import InvalidInput
from memcurator.policy.share import SharedEntry
from memcurator.trust.auth import Signature


def test_loopback_link_counts_the_bytes_that_cross() -> None:
    link = LoopbackLink()
    try:
        e = SharedEntry(
            "Task: x\nAction: SELECT 1;",
            "insight",
            9,
            0.5,
            1.0,
            0.1,
            "id1",
            signature=Signature("agent0#2", "ab" * 32),
        )
        frame = encode(e, "agent0")
        n = link.send(frame) + link.send(b"x" * 300_000)  # larger than a socket buffer
        link.end_round()
        got = link.recv_round(1)
        assert n == 8 + len(frame) + 300_000
        assert decode(got[0]) == ("agent0", e) and got[1] == b"x" * 300_000
    finally:
        link.close()


def test_peer_config_checks() -> None:
    with pytest.raises(InvalidInput, match="peers"):
        PeerConfig(peers=3)
    with pytest.raises(InvalidInput):
        PeerConfig(share_every=0)


def test_bench_peers_fake_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "res"
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "--executor",
            "fake",
            "--peers",
            "2",
            "--tasks",
            "12",
            "--families",
            "8",
            "--share-every",
            "4",
            "--uplink",
            "3000",
            "--outside-rate",
            "0.3",
            "--policies",
            "curator,lru",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    runs = json.loads((out / "peers.json").read_text())
    by = {r["policy"]: r for r in runs}
    assert set(by) == {"curator", "lru"}
    for r in runs:
        assert r["rounds"] == 3 and r["peers"] == 2 and 0 <= r["accuracy"] <= 1
        assert set(r["channels"]) == {"external", "peer", "self"}
        assert r["channels"]["self"]["poison_n"] > 0 and r["channels"]["peer"]["poison_n"] > 0
    # lru admits every attack and broadcasts; curator's gate refuses them under the budget
    assert by["lru"]["channels"]["external"]["poison_admitted"] == 1.0
    assert by["curator"]["channels"]["external"]["poison_admitted"] < 0.1
    assert by["curator"]["channels"]["self"]["poison_admitted"] < 0.1
    assert 0 < by["curator"]["uplink_bytes_per_round"] <= 3000 + 4
    assert by["lru"]["uplink_bytes_per_round"] > by["curator"]["uplink_bytes_per_round"]
    assert "channel" in (out / "peers.txt").read_text()
