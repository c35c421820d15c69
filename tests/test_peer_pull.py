"""The peer bench's demand-driven exchange (``PeerConfig.exchange = "pull"``): agents demand the
tasks their memory does not cover, fetch exactly those entries, every byte counted against the
sender's uplink; the compromised peer's offers are caught as lies (issue 33)."""

from __future__ import annotations

import pytest

from memcurator.bench.peers import LIES_TOLERATED, PULL_FIELDS, PeerConfig, run_group
from memcurator.errors import InvalidInput


@pytest.fixture(scope="module")
def fams() -> list:
    from memcurator.bench.runner import load_families

    return load_families(None, "sql")


@pytest.fixture(scope="module")
def ex() -> object:
    from memcurator.bench.session import make_executor

    return make_executor("fake", env="sql")


def _cfg(**kw: object) -> PeerConfig:
    # few families, so the agents meet each other's exact tasks
    base = dict(peers=4, n_tasks=10, share_every=5, n_families=3, outside_rate=0.0, seed=0,
                exchange="pull", attack_at=0.2)  # fmt: skip
    base.update(kw)
    return PeerConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw", [{"exchange": "gossip"}, {"match_cos": 0.0}, {"match_cos": 1.2}, {"exchange": ""}]
)
def test_peer_config_refuses_bad_exchange_settings(kw: dict) -> None:
    with pytest.raises(InvalidInput):
        PeerConfig(**kw)  # type: ignore[arg-type]


def test_pull_fetches_exact_tasks_and_catches_the_lying_peer(fams: list, ex: object) -> None:
    acc, det = run_group("curator", fams, ex, _cfg())
    pull = det["pull"]
    assert set(pull) == set(PULL_FIELDS)
    n_tasks = len(det["records"])
    assert 0 < pull["demands"] <= n_tasks  # only tasks the memory did not cover
    assert pull["fetched_exact"] >= 1 and pull["fetched"] <= pull["demands"]
    assert pull["admitted"] <= pull["fetched"]
    # the compromised peer claims every task once the attack began; each receiver stops
    # asking it after LIES_TOLERATED lies
    assert 1 <= pull["lies"] <= LIES_TOLERATED * 3
    pulled = [r for r in det["records"] if r["pulled"]]
    assert len(pulled) == pull["fetched"] and {r["exchange"] for r in det["records"]} == {"pull"}
    # what was fetched as the exact task is the task: under the scripted responder (it copies
    # the first exemplar) an admitted exact entry that is released solves it
    assert any(r["local_ok"] for r in pulled if r["pulled"] == "exact")
    assert 0 <= acc <= 1


@pytest.mark.parametrize("L", [0, 60, 600, 3000])
def test_pull_bytes_stay_within_the_uplink(fams: list, ex: object, L: int) -> None:
    _, det = run_group("curator", fams, ex, _cfg(uplink=L, attack=False))
    # no attacker traffic: every byte on the links is a demand, offer, fetch or frame, each
    # charged to its sender, at most L per agent and round
    assert det["uplink_bytes_per_round"] <= L
    if L < 40:  # not even one framed demand (16-byte key + 4) to three peers fits
        assert det["pull"]["fetched"] == 0 and det["pull"]["over_budget"] > 0


def test_a_broadcasting_policy_broadcasts_under_pull(fams: list, ex: object) -> None:
    _, det = run_group("lru", fams, ex, _cfg(attack=False))
    assert det["pull"]["demands"] == 0 and det["uplink_bytes_per_round"] > 0
