"""The peer-group benchmark (bench --peers): transport, wire format, and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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


# ------------------------------------------------------------------ records, comparisons, merging
PEERS = ["bench", "--executor", "fake", "--peers", "2", "--tasks", "20", "--families", "8",
         "--share-every", "4", "--outside-rate", "0.3"]  # fmt: skip
runner = CliRunner()


@pytest.fixture(scope="module")
def job_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str], Path]:
    """As a job queue makes them: one folder per (seed, policy), an uplink sweep in each."""
    root = tmp_path_factory.mktemp("peers")
    out = {}
    for seed in (0, 1):
        for pol in ("curator", "lru"):
            f = root / f"k-s{seed}-{pol}"
            res = runner.invoke(
                app,
                [*PEERS, "--uplink", "1000,3000", "--seed-start", str(seed), "--policies", pol,
                 "--out", str(f)],
            )  # fmt: skip
            assert res.exit_code == 0, res.output
            out[(seed, pol)] = f
    return out


def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_peer_records_one_row_per_task_and_condition(job_folders: dict) -> None:
    f = job_folders[(0, "curator")]
    rows = _csv(f / "records.csv")
    runs = json.loads((f / "peers.json").read_text())
    assert [r["uplink"] for r in runs] == [1000, 3000]
    # 2 uplinks x 3 arms (share, isolated, pooled) x 2 agents x 20 tasks, each once
    keys = {(r["uplink"], r["arm"], r["agent"], r["step"]) for r in rows}
    assert len(rows) == len(keys) == 2 * 3 * 2 * 20
    assert {r["outside"] for r in rows if r["arm"] == "pooled"} == {"False"}
    assert {"task_id", "family", "local_ok", "injected_same_family", "attack_channel",
            "attack_resident", "asr_hit", "subset"} <= set(rows[0])  # fmt: skip
    assert "injected_poison" not in rows[0]
    for run in runs:
        mine = [r for r in rows if r["uplink"] == str(run["uplink"])]
        out = [r["local_ok"] == "True" for r in mine if r["outside"] == "True"]
        iso = [r["local_ok"] == "True" for r in mine if r["arm"] == "isolated"]
        pool = [r["local_ok"] == "True" for r in mine if r["arm"] == "pooled"]
        assert sum(out) / len(out) == pytest.approx(run["accuracy"])
        assert sum(iso) / len(iso) == pytest.approx(run["accuracy_isolated"])
        assert sum(pool) / len(pool) == pytest.approx(run["accuracy_pooled"])
        for ch, v in run["channels"].items():  # the ASR is the records' asr_hit on the channel
            hits = [r for r in mine if r["outside"] == "True" and r["attack_channel"] == ch]
            got = sum(r["asr_hit"] == "True" for r in hits)
            assert v["asr_n"] == sum(int(r["step"]) >= 6 for r in hits)
            assert got == round((v["asr"] or 0) * v["asr_n"])
    # the isolated run is the same at every L: run once, recorded under each
    iso = {
        u: [(r["agent"], r["step"], r["local_ok"], r["sql"]) for r in rows
            if r["arm"] == "isolated" and r["uplink"] == u]
        for u in ("1000", "3000")
    }  # fmt: skip
    assert iso["1000"] == iso["3000"]
    doc = json.loads((f / "summary.json").read_text())
    assert doc["config"]["kind"] == "peers" and doc["config"]["complete"] is True
    assert doc["config"]["runs_done"] == 2


def test_broadcasting_policy_runs_once_per_seed(job_folders: dict) -> None:
    runs = json.loads((job_folders[(0, "lru")] / "peers.json").read_text())
    assert len(runs) == 1 and runs[0]["broadcast"] is True and runs[0]["uplink"] == 1000
    assert "1000 (broadcast)" in (job_folders[(0, "lru")] / "peers.txt").read_text()


def test_peer_run_saves_after_every_run_and_marks_it_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memcurator.bench import peers as peers_mod

    real = peers_mod.run_group
    calls = [0]

    def interrupting(*a: object, **kw: object) -> object:
        calls[0] += 1
        if calls[0] == 4:  # curator L=1000 (outside, isolated, pooled) done; Ctrl-C at L=3000
            raise KeyboardInterrupt
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(peers_mod, "run_group", interrupting)
    out = tmp_path / "int"
    res = runner.invoke(
        app, [*PEERS, "--uplink", "1000,3000", "--policies", "curator,lru", "--out", str(out)]
    )
    assert res.exit_code == 130
    assert "1 of 3" in " ".join(res.output.split())
    doc = json.loads((out / "summary.json").read_text())
    assert doc["config"]["complete"] is False and doc["config"]["runs_done"] == 1
    assert len(_csv(out / "records.csv")) == 3 * 2 * 20  # 3 arms x 2 agents x 20 tasks
    assert (out / "peers.md").exists()


def _planted(n_tasks: int, p_iso: float, gain: float, seed: int = 0) -> list[dict]:
    """Records of 2 seeds x 2 agents: the outside run solves ``gain`` more of the tasks."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in (0, 1):
        for agent in ("agent0", "agent1"):
            iso = rng.random(n_tasks) < p_iso
            flip = rng.random(n_tasks) < gain / (1 - p_iso)  # unsolved tasks that outside solves
            for outside, ok in ((False, iso), (True, iso | flip)):
                for t in range(n_tasks):
                    rows.append(
                        {"policy": "curator", "seed": s, "uplink": 1000, "broadcast": False,
                         "outside": outside, "agent": agent, "step": t,
                         "task_id": f"{s}-{agent}-{t}", "local_ok": bool(ok[t])}
                    )  # fmt: skip
    return rows


def test_paired_ci_recovers_a_planted_gain_and_holds_zero_without_one() -> None:
    from memcurator.bench.peer_report import outside_vs_isolated

    # task ids differ between agents at the same step: pairing across agents would fail
    d = outside_vs_isolated(_planted(150, 0.4, 0.15), n_boot=500)[0]
    assert d["n"] == 600 and d["wins"] > 0 and d["losses"] == 0
    assert d["lo"] > 0.05 and d["lo"] <= d["diff"] <= d["hi"] and d["verdict"] == "better"
    assert abs(d["diff"] - 0.15) < 0.05 and d["p"] < 1e-6
    same = outside_vs_isolated(_planted(150, 0.4, 0.0), n_boot=500)[0]
    assert same["diff"] == 0 and same["verdict"] == "no worse"
    # a planted loss: swap the conditions
    lost = [{**r, "outside": not r["outside"]} for r in _planted(150, 0.4, 0.15)]
    assert outside_vs_isolated(lost, n_boot=500)[0]["verdict"] == "worse"


def test_against_baseline_pairs_accuracy_and_compares_bytes() -> None:
    from memcurator.bench.peer_report import against_baseline

    gain = _planted(150, 0.4, 0.15)
    recs = [
        {**r, "outside": True, "policy": "lru" if not r["outside"] else "curator",
         "uplink": 1000 if not r["outside"] else u, "broadcast": not r["outside"]}
        for u in (1000, 3000) for r in gain
    ]  # fmt: skip
    recs = [r for r in recs if not (r["policy"] == "lru" and r["uplink"] == 3000)]
    recs = list({(r["policy"], r["uplink"], r["agent"], r["seed"], r["step"]): r
                 for r in recs}.values())  # fmt: skip
    runs = [{"policy": "curator", "seed": s, "uplink": u, "uplink_bytes_per_round": u / 4}
            for s in (0, 1) for u in (1000, 3000)]  # fmt: skip
    runs += [{"policy": "lru", "seed": s, "uplink": 1000, "uplink_bytes_per_round": 1000.0,
              "broadcast": True} for s in (0, 1)]  # fmt: skip
    rows = {d["uplink"]: d for d in against_baseline(runs, recs, "lru", n_boot=300)}
    assert set(rows) == {1000, 3000} and rows[3000]["baseline_uplink"] == 1000
    assert rows[1000]["bytes_ratio"] == pytest.approx(0.25) and rows[1000]["half_bytes"]
    assert rows[3000]["bytes_ratio"] == pytest.approx(0.75) and not rows[3000]["half_bytes"]
    assert rows[1000]["lo"] > 0 and rows[1000]["not_worse"] and rows[1000]["n"] == 600
    with pytest.raises(InvalidInput, match="baseline"):
        against_baseline(runs, recs, "recency")


def test_report_merges_peer_job_folders(job_folders: dict, tmp_path: Path) -> None:
    merged = tmp_path / "merged"
    res = runner.invoke(app, ["report", *map(str, job_folders.values()), "--out", str(merged)])
    assert res.exit_code == 0, res.output
    recs = _csv(merged / "records.csv")
    parts = sum(len(_csv(f / "records.csv")) for f in job_folders.values())
    assert len(recs) == parts == 2 * (2 * 3 * 2 * 20) + 2 * (3 * 2 * 20)  # 3 arms
    doc = json.loads((merged / "summary.json").read_text())
    assert doc["config"]["kind"] == "peers" and doc["config"]["baseline"] == "lru"
    assert len(doc["runs"]) == 6
    ovi = doc["comparisons"]["outside_vs_isolated"]
    assert {(d["policy"], d["uplink"]) for d in ovi} == {("curator", 1000), ("curator", 3000),
                                                         ("lru", 1000)}  # fmt: skip
    assert all(d["n"] == 2 * 2 * 20 for d in ovi)  # 2 seeds x 2 agents x 20 tasks
    ab = doc["comparisons"]["against_baseline"]
    assert [(d["policy"], d["uplink"]) for d in ab] == [("curator", 1000), ("curator", 3000)]
    md = (merged / "peers.md").read_text()
    assert "seeds 0, 1" in md and "## Accuracy with outside traffic" in md
    assert "## Each policy − lru" in md and "## Uplink front" in md
    pooled = {(p["policy"], p["uplink"]): p for p in doc["comparisons"]["pooled"]}
    assert pooled[("curator", 1000)]["seeds"] == 2
    # uplink front: curator swept over L, lru (broadcast) as the reference
    rows = json.loads((merged / "uplink_front.json").read_text())["rows"]
    cur = [r for r in rows if r["policy"] == "curator"]
    lru = [r for r in rows if r["policy"] == "lru"]
    assert [r["budget"] for r in cur] == [1000, 3000] and lru[0]["budget"] is None
    assert all(r["seeds"] == 2 and r["ci"] == "bootstrap" for r in rows)
    bytes_ = {(p["policy"], p["uplink"]): p["uplink_bytes_per_round"] for p in pooled.values()}
    assert cur[0]["x"] == pytest.approx(bytes_[("curator", 1000)])
    assert lru[0]["x_of_ref"] == pytest.approx(1.0)
    assert sum(r.get("knee", False) for r in cur) == 1
    assert (merged / "uplink_front.png").stat().st_size > 0


def test_report_refuses_mixing_peer_and_single_agent_folders(
    job_folders: dict, tmp_path: Path
) -> None:
    single = tmp_path / "single"
    res = runner.invoke(
        app,
        ["bench", "--executor", "fake", "--tasks", "6", "--families", "4", "--policies", "lru",
         "--out", str(single)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", str(job_folders[(0, "lru")]), str(single)])
    assert res.exit_code == 2
    flat = " ".join(res.output.split())
    assert "cannot merge peer-group folders" in flat and "single-agent" in flat


def test_report_refuses_peer_folders_of_other_settings(job_folders: dict, tmp_path: Path) -> None:
    other = tmp_path / "other"
    res = runner.invoke(
        app,
        [*PEERS[:-1], "0.5", "--uplink", "1000", "--policies", "lru", "--out", str(other)],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", str(job_folders[(0, "lru")]), str(other)])
    assert res.exit_code == 2 and "outside_rate" in res.output


# ------------------------------------------------------------------ payload sets (issue 22)
def test_payload_set_is_checked_and_drawn() -> None:
    from memcurator.bench.peers import draw_plan
    from memcurator.bench.runner import load_families
    from memcurator.envs.sql.attacks import ATTACK_PAYLOADS, NEW_PAYLOADS

    with pytest.raises(InvalidInput, match="payloads"):
        PeerConfig(payloads="everything")
    fams = load_families(None, "sql")
    for name, want in (("classic", ATTACK_PAYLOADS), ("new", NEW_PAYLOADS)):
        plan = draw_plan(fams, PeerConfig(peers=2, n_tasks=10, n_families=8, payloads=name))
        drawn = [(p, t) for atk in plan.attacks.values() for _, _, p, t in atk]
        assert {p for p, _ in drawn} == set(want)
        # every planted text has its behaviour check, of its own payload
        assert all(plan.checks[t].payload == p for p, t in drawn if t is not None)


def test_bench_peers_new_payloads_counted_per_payload(tmp_path: Path) -> None:
    out = tmp_path / "new"
    res = runner.invoke(
        app,
        [*PEERS, "--uplink", "3000", "--policies", "lru", "--payloads", "new", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    (run,) = json.loads((out / "peers.json").read_text())
    for ch in ("external", "peer", "self"):
        per = run["channels"][ch]["payloads"]
        assert set(per) <= {"exfiltrate", "tool-output", "false-fact", "procedure"}
        assert {"exfiltrate", "tool-output", "procedure"} <= set(per)
        for c in per.values():
            assert c["offered_n"] >= 1 and c["admitted"] == c["offered_n"]  # lru keeps all
            assert c["tasks_n"] == run["channels"][ch]["asr_n"]
            assert c["hits"] <= c["shown_n"] <= c["resident_n"] <= c["tasks_n"]
    md = (out / "peers.md").read_text()
    assert "## Behaviour ASR per payload kind" in md and "| exfiltrate |" in md
    assert json.loads((out / "summary.json").read_text())["config"]["payloads"] == "new"
    # a folder of other payloads does not merge with a classic one
    classic = tmp_path / "classic"
    res = runner.invoke(
        app, [*PEERS, "--uplink", "3000", "--policies", "lru", "--out", str(classic)]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", str(out), str(classic)])
    assert res.exit_code == 2 and "payloads" in res.output
    res = runner.invoke(app, ["bench", "--executor", "fake", "--payloads", "new"])
    assert res.exit_code == 2 and "--payloads" in res.output
