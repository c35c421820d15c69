"""The peer bench's workloads, its pooled reference (SQLite and PostgreSQL), the report's
share of the pooled gain (issue 33, items 1 and 2), and its demand-driven exchange
(``PeerConfig.exchange = "pull"``): agents demand the tasks their memory does not cover, fetch
exactly those entries, every byte counted against the sender's uplink; the compromised peer's
offers are caught as lies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memcurator.bench.peer_report import arm, claim_rows, cold_start, peers_markdown, pooled_gain
from memcurator.bench.peers import (
    LIES_TOLERATED,
    NEWCOMER,
    PULL_FIELDS,
    PeerConfig,
    decode,
    draw_plan,
    encode,
    run_group,
    workload_phases,
)
from memcurator.bench.stream import StreamConfig, build_stream
from memcurator.errors import InvalidInput
from memcurator.policy.share import SharedEntry
from memcurator.trust.auth import Signature
from memcurator.trust.outcome import OutcomeClaim, SignedOutcome


@pytest.fixture(scope="module")
def fams() -> list:
    from memcurator.bench.runner import load_families

    return load_families(None, "sql")


@pytest.fixture(scope="module")
def ex() -> object:
    from memcurator.bench.session import make_executor

    return make_executor("fake", env="sql")


def _blocks(w: tuple[float, ...]) -> set[int]:
    return {j for j, x in enumerate(w) if x > 0}


# ------------------------------------------------------------------------------- workloads
@pytest.mark.parametrize("peers, n_pool", [(2, 6), (4, 8), (4, 30), (8, 16)])
def test_rotating_moves_each_agent_onto_its_next_peers_block(peers: int, n_pool: int) -> None:
    cfg = PeerConfig(peers=peers, workload="rotating", cross=0.0, n_families=n_pool)
    ph = {i: workload_phases(cfg, i, n_pool) for i in range(peers)}
    for i in range(peers):
        assert ph[i] is not None and len(ph[i]) == peers
        for p in range(1, peers):
            # what agent i works on in phase p, agent i + 1 worked on in phase p - 1
            assert ph[i][p] == ph[(i + 1) % peers][p - 1]
        assert set().union(*(_blocks(w) for w in ph[i])) == set(range(n_pool))


@pytest.mark.parametrize("cross", [0.0, 0.2, 0.5])
def test_specialised_blocks_are_disjoint_with_cross_traffic(cross: float) -> None:
    cfg = PeerConfig(peers=4, workload="specialised", cross=cross, n_families=12)
    own = []
    for i in range(4):
        (w,) = workload_phases(cfg, i, 12)  # type: ignore[misc]
        a = np.asarray(w)
        block = np.array_split(np.arange(12), 4)[i]
        assert a[block].sum() == pytest.approx(1 - cross)
        assert a.sum() == pytest.approx(1.0)
        own.append(set(block.tolist()))
    assert all(not (own[i] & own[j]) for i in range(4) for j in range(i + 1, 4))


@pytest.mark.parametrize("workload", ["control", "cold-start"])
def test_control_and_cold_start_keep_the_stream_order(workload: str) -> None:
    assert workload_phases(PeerConfig(workload=workload), 0, 30) is None


def test_stream_phases_draw_only_from_their_weights(fams: list) -> None:
    pool = fams[:8]
    w1 = tuple(1.0 if j < 2 else 0.0 for j in range(8))
    w2 = tuple(1.0 if j >= 6 else 0.0 for j in range(8))
    s = build_stream(StreamConfig(n_tasks=40, poison=0, drift=0, seed=3, phases=(w1, w2)), pool)
    first = {t.family for t in s.tasks[:20]}
    second = {t.family for t in s.tasks[20:]}
    assert first <= {pool[0].family, pool[1].family}
    assert second <= {pool[6].family, pool[7].family}
    # without phases the draws are those of before (the schedule adds no draws)
    a = build_stream(StreamConfig(n_tasks=30, poison=0, drift=0, seed=5), pool)
    b = build_stream(StreamConfig(n_tasks=30, poison=0, drift=0, seed=5, phases=None), pool)
    assert [t.id for t in a.tasks] == [t.id for t in b.tasks]


@pytest.mark.parametrize(
    "phases",
    [(), ((0.0, 0.0),), ((1.0, -1.0),), ((1.0, float("nan")),), ((1.0, 0.0), (1.0,))],
)
def test_bad_phases_are_refused(phases: tuple) -> None:
    with pytest.raises(InvalidInput):
        StreamConfig(phases=phases)


@pytest.mark.parametrize(
    "kw",
    [
        {"workload": "bursty"},
        {"cross": 1.5},
        {"workload": "cold-start", "n_tasks": 10, "join_after": 10},
        {"store": ""},
    ],
)
def test_peer_config_refuses_bad_workload_settings(kw: dict) -> None:
    with pytest.raises(InvalidInput):
        PeerConfig(**kw)


def test_plan_draws_do_not_depend_on_claims(fams: list) -> None:
    a = draw_plan(fams, PeerConfig(n_tasks=20, n_families=10, claims=True))
    b = draw_plan(fams, PeerConfig(n_tasks=20, n_families=10, claims=False))
    assert [t.id for s in a.streams for t in s.tasks] == [t.id for s in b.streams for t in s.tasks]
    assert a.feed == b.feed and a.attacks == b.attacks
    assert b.false == {} and a.false and a.bad_peer not in a.false


def test_false_records_fail_their_tasks_check(fams: list) -> None:
    from memcurator.envs.sql import check

    plan = draw_plan(fams, PeerConfig(n_tasks=30, n_families=10, seed=1))
    n = 0
    for recs in plan.false.values():
        for fam, text, action, spec in recs:
            assert spec.family == fam and action in text and not check(spec, action).ok
            assert check(spec, spec.sql).ok  # the task itself is solvable
            n += 1
    assert n > 0


def test_wire_form_carries_the_signed_outcome() -> None:
    so = SignedOutcome(OutcomeClaim("t", "SELECT 1;", "pass", "h", "s"), Signature("k", "m"))
    e = SharedEntry("Task: t\nAction: SELECT 1;", "insight", 9, 0.5, 1.0, 0.1, "id",
                    signature=Signature("a#1", "ab"), outcome=so)  # fmt: skip
    assert decode(encode(e, "agent0")) == ("agent0", e)
    plain = SharedEntry("x", "insight", 1, 0.0, 1.0, 0.0, "id")
    assert b"outcome" not in encode(plain, "a")  # frames of entries without one are as before


# ------------------------------------------------------------------ pooled and cold start
def _cfg(**kw: object) -> PeerConfig:
    base = dict(peers=2, n_tasks=8, share_every=4, n_families=6, outside_rate=0.3, seed=0)
    base.update(kw)
    return PeerConfig(**base)  # type: ignore[arg-type]


def _pooled_reads_one_namespace(fams: list, ex: object, store: str) -> None:
    cfg = _cfg(store=store)
    _, iso = run_group("keep-all", fams, ex, cfg, outside=False)
    acc, pool = run_group("keep-all", fams, ex, cfg, pooled=True)
    assert {r["arm"] for r in pool["records"]} == {"pooled"}
    assert {r["arm"] for r in iso["records"]} == {"isolated"}
    last = {r["agent"]: r["n_entries"] for r in pool["records"] if r["step"] == cfg.n_tasks - 1}
    alone = max(r["n_entries"] for r in iso["records"])
    # every agent sees what all of them wrote: one namespace holds the group's records
    assert min(last.values()) > alone
    assert 0 <= acc <= 1 and pool["rounds"] == 0


def test_pooled_reference_shares_one_namespace_on_sqlite(
    fams: list, ex: object, tmp_path: Path
) -> None:
    _pooled_reads_one_namespace(fams, ex, ":memory:")
    _pooled_reads_one_namespace(fams, ex, str(tmp_path / "peers.db"))


def test_pooled_reference_shares_one_namespace_on_postgres(
    fams: list, ex: object, pg_url: str
) -> None:
    _pooled_reads_one_namespace(fams, ex, pg_url)


def test_cold_start_newcomer_runs_and_exchanges_only_after_joining(fams: list, ex: object) -> None:
    cfg = _cfg(workload="cold-start", join_after=4, n_tasks=12)
    acc, det = run_group("curator", fams, ex, cfg)
    new = [r for r in det["records"] if r["agent"] == f"agent{NEWCOMER}"]
    assert [r["step"] for r in new] == list(range(4, 12))
    assert all(r["joined_at"] == 4 for r in new)
    other = [r for r in det["records"] if r["agent"] != f"agent{NEWCOMER}"]
    assert len(other) == 12 and all(r["joined_at"] == 0 for r in other)
    assert acc == pytest.approx(np.mean([r["local_ok"] for r in det["records"]]))
    assert det["rounds"] == 3


# ------------------------------------------------------------------------------- report
def _recs(arm_oks: dict[str, list[int]], **extra: object) -> list[dict]:
    return [
        {"policy": "c", "uplink": 5, "seed": 0, "agent": "a", "step": t, "arm": a,
         "outside": a == "share", "local_ok": bool(ok), **extra}
        for a, oks in arm_oks.items()
        for t, ok in enumerate(oks)
    ]  # fmt: skip


def test_pooled_gain_ratio_and_ci() -> None:
    rng = np.random.default_rng(0)
    iso = (rng.random(300) < 0.3).astype(int)
    pool = np.maximum(iso, rng.random(300) < 0.4).astype(int)  # pooling solves more
    share = np.where(rng.random(300) < 0.5, pool, iso)  # about half of what pooling adds
    recs = _recs({"share": list(share), "isolated": list(iso), "pooled": list(pool)})
    runs = [{"policy": "c", "uplink": 5, "seed": 0, "uplink_bytes_per_round": 200.0},
            {"policy": "b", "uplink": 5, "seed": 0, "uplink_bytes_per_round": 4000.0}]  # fmt: skip
    (g,) = pooled_gain(runs, recs, "b", n_boot=300)
    want = (share.mean() - iso.mean()) / (pool.mean() - iso.mean())
    assert g["captured"] == pytest.approx(want) and g["lo"] < want < g["hi"]
    assert 0.2 < g["lo"] and g["hi"] < 0.8 and g["bytes_ratio"] == pytest.approx(0.05)
    # nothing captured when share is isolated; all when it is pooled
    none = pooled_gain(runs, _recs({"share": list(iso), "isolated": list(iso),
                                    "pooled": list(pool)}), n_boot=200)[0]  # fmt: skip
    full = pooled_gain(runs, _recs({"share": list(pool), "isolated": list(iso),
                                    "pooled": list(pool)}), n_boot=200)[0]  # fmt: skip
    assert none["captured"] == 0.0 and full["captured"] == 1.0
    # without a pooled arm there is no ratio
    assert pooled_gain(runs, _recs({"share": [1], "isolated": [0]}), n_boot=200) == []


def test_report_keeps_the_pooled_arm_out_of_the_other_comparisons() -> None:
    recs = _recs({"share": [1, 0, 1, 0], "isolated": [0, 0, 1, 0], "pooled": [1, 1, 1, 1]},
                 task_id="x", broadcast=False)  # fmt: skip
    for r in recs:
        r["task_id"] = f"t{r['step']}"
    runs = [{"policy": "c", "uplink": 5, "seed": 0, "peers": 1, "tasks": 4, "accuracy": 0.5,
             "accuracy_isolated": 0.25, "accuracy_pooled": 1.0, "uplink_bytes_per_round": 9.0,
             "channels": {}, "workload": "rotating"}]  # fmt: skip
    text, data = peers_markdown(runs, recs, None, n_boot=200)
    (o,) = data["outside_vs_isolated"]
    assert o["isolated"] == 0.25 and o["n"] == 4  # pooled rows are not read as isolated
    assert data["pooled_gain"][0]["captured"] == pytest.approx(1 / 3)
    assert "Share of the pooled gain" in text and "workload rotating" in text
    assert [arm(r) for r in recs[:1]] == ["share"]


def test_cold_start_rows_read_the_newcomers_first_tasks() -> None:
    recs = _recs({"share": [1, 0, 1, 1], "isolated": [0, 0, 0, 1], "pooled": [1, 1, 1, 1]},
                 joined_at=1)  # fmt: skip
    (c,) = cold_start(recs, first=2, n_boot=200)
    assert c["n"] == 2 and c["share"] == 0.5 and c["pooled"] == 1.0 and c["ratio"] == 0.5
    assert cold_start(_recs({"share": [1], "isolated": [1], "pooled": [1]}), n_boot=200) == []


def test_claim_rows_sum_over_seeds() -> None:
    runs = [
        {
            "policy": "c",
            "uplink": 5,
            "seed": s,
            "claims": {"false_uses": 3, "caught": 2, "caught_after": [2, 3]},
        }
        for s in (0, 1)
    ]
    (r,) = claim_rows(runs)
    assert r["false_uses"] == 6 and r["caught"] == 4 and r["k"] == [2, 3, 2, 3]
    assert r["k_mean"] == 2.5
    assert claim_rows([{"policy": "c", "uplink": 5, "seed": 0}]) == []


# ------------------------------------------------------------------ demand-driven exchange
def _pull_cfg(**kw: object) -> PeerConfig:
    """A group on few families, so the agents meet each other's exact tasks."""
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
    acc, det = run_group("curator", fams, ex, _pull_cfg())
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
    _, det = run_group("curator", fams, ex, _pull_cfg(uplink=L, attack=False))
    # no attacker traffic: every byte on the links is a demand, offer, fetch or frame, each
    # charged to its sender, at most L per agent and round
    assert det["uplink_bytes_per_round"] <= L
    if L < 36:  # not even one framed demand (8-byte key + 4) to three peers fits
        assert det["pull"]["fetched"] == 0 and det["pull"]["unasked"] > 0


def test_a_broadcasting_policy_broadcasts_under_pull(fams: list, ex: object) -> None:
    _, det = run_group("lru", fams, ex, _pull_cfg(attack=False))
    assert det["pull"]["demands"] == 0 and det["uplink_bytes_per_round"] > 0
