"""Read-time curation (issue 12): JitMem's bank, judge gate, curators and learning; MemPilot's
pool, cost and latency formulas, orchestrator, preference learning; bad input falls back."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memcurator import Memory
from memcurator.bench.agent import AgentConfig, run_task
from memcurator.curate.base import CurateContext
from memcurator.curate.extractive import extract, parse_raw
from memcurator.curate.jitmem import JitMemCurator
from memcurator.curate.learner import gdpo_advantages
from memcurator.curate.mempilot import MemPilotOrchestrator
from memcurator.curate.pool import ModelPool, PoolModel, default_pool, load_pool
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.errors import InvalidInput
from memcurator.llm.fake import ScriptedExecutor
from memcurator.llm.latency import AffineLatency
from memcurator.policy import create_policy
from memcurator.types import Entry, Task

RAW = (
    "Task: Record that member 102 paid 75 dollars.\n"
    "Observation: Table payments(member_id INT, amount INT)\n"
    "Action: INSERT INTO payments (member_id, amount) VALUES (102, 75);\n"
    "Outcome: success (reward 1, solver expert)"
)
TASK = "Record that member 205 paid 90 dollars."
SCHEMA = "Table payments(member_id INT, amount INT)"
ALIGNED = "INSERT INTO payments (member_id, amount) VALUES (205, 90);"


def entry(text=RAW, eid="e1", **meta):
    return Entry(eid, "ns", "raw", text, len(text), len(text), np.zeros(4, np.float32), meta=meta)


def ctx(entries, **kw):
    kw.setdefault("observation", SCHEMA)
    return CurateContext(TASK, lambda q, k: list(entries)[:k], bank=lambda: list(entries), **kw)


def spec(rows=((1, 10),)):
    return SQLTaskSpec(
        family="pay", instruction=TASK, table="payments",
        columns=(("member_id", "INT"), ("amount", "INT")), rows=rows,
        sql="INSERT INTO payments (member_id, amount) VALUES (205, 90);", kind="insert",
    )  # fmt: skip


def sql_task():
    return Task("pay/v1", TASK, "pay", {"spec": spec()})


# ------------------------------------------------------------------ extractive curator
def test_align_substitutes_literals_and_follows_a_schema_rename():
    p = [parse_raw(RAW)]
    payload, used = extract("align", TASK, "Table payments(member_id INT, paid INT)", p)
    assert used == [0]
    assert payload == f"Task: {TASK}\nAction: " + ALIGNED.replace("amount", "paid")
    # closest keeps the past pair untouched; raw is the whole trajectory
    assert "102, 75" in extract("closest", TASK, SCHEMA, p)[0]
    assert extract("raw", TASK, SCHEMA, p)[0].count("Observation:") == 1


def test_align_picks_the_trajectory_whose_literals_and_table_map():
    other = RAW.replace("payments", "orders").replace("member", "client")
    ents = [parse_raw(other), parse_raw(RAW)]
    payload, used = extract("align", TASK, SCHEMA, ents)
    assert used == [1] and ALIGNED in payload


def test_payload_is_task_conditioned_and_shorter_than_raw():
    cur = JitMemCurator(operators=["align"])
    a = cur.curate(ctx([entry()]))
    b = cur.curate(CurateContext("Record that member 7 paid 12 dollars.", lambda q, k: [],
                                 bank=lambda: [entry()], observation=SCHEMA))  # fmt: skip
    assert a.payload != b.payload and "(7, 12)" in b.payload
    assert a.raw_chars == len(RAW) > len(a.payload)
    assert a.calls == [] and a.source_ids == ["e1"]


def test_bm25_over_task_descriptions_only():
    # the word "dollars" only appears in the second entry's *action*, not in its task line
    a = entry(eid="a")
    b = entry("Task: delete old rows\nAction: SELECT 'member paid dollars';", eid="b")
    r = JitMemCurator(operators=["multi"], k=5).curate(ctx([b, a]))
    assert r.source_ids == ["a"]


# ------------------------------------------------------------------ bad input: fallbacks
def test_empty_bank_gives_no_payload_and_a_task_record():
    r = JitMemCurator(operators=["align"]).curate(ctx([]))
    assert r.payload == "" and r.notes == ["empty bank: no payload"]
    mem = Memory(policy="jitmem/extractive", max_bytes=None)
    ex = ScriptedExecutor(lambda p: "YES" if "YES or NO" in p else "SELECT 1;")
    rec = run_task(sql_task(), mem, ex, AgentConfig(), policy_name="jitmem", seed=0, step=0)
    assert rec.injected == 0 and rec.curate_note == "empty bank: no payload"
    assert rec.escalated and len(mem) == 1  # the expert's trajectory, judged YES, is written
    r2 = MemPilotOrchestrator().curate(ctx([]))
    assert r2.payload == "" and "empty bank" in r2.notes[0]


@pytest.mark.parametrize("answer", ["", "   \n", "\x00\x01\x02\x03\x04", "zzqx wvuy"])
def test_curator_that_returns_nothing_or_garbage_falls_back_to_align(answer, caplog):
    ex = ScriptedExecutor(lambda p: answer)
    cur = JitMemCurator(operators=["llm-brief"])
    with caplog.at_level("INFO", logger="memcurator.curate.jitmem"):
        r = cur.curate(ctx([entry()], executor=ex))
    assert ALIGNED in r.payload
    assert "fell back to align" in r.notes[0]
    assert len(r.calls) == 1  # the failed call is still accounted
    assert "fell back" in caplog.text


# ------------------------------------------------------------------ a real HTTP stub server
class _Stub(BaseHTTPRequestHandler):
    mode = "ok"
    seen: list = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if self.mode == "error":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")
            return
        if self.mode == "slow":
            time.sleep(1.0)
        prompt = body["messages"][0]["content"]
        text = " " + ALIGNED if "### Current task" in prompt else "?"
        out = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20},
        }).encode()  # fmt: skip
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first (the "slow" case)


@pytest.fixture
def stub(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    pool_file = tmp_path / "pool.toml"
    pool_file.write_text(
        "[[model]]\nname = 'local'\nkind = 'executor'\n\n"
        "[[model]]\nname = 'remote'\nkind = 'openai'\n"
        f"base_url = 'http://127.0.0.1:{server.server_address[1]}/v1'\n"
        "model = 'stub-8b'\nprice_in = 0.05\nprice_out = 0.08\n"
        "latency = [0.439, 3.6e-5, 4.99e-3]\ntimeout_s = 0.3\n"
    )
    _Stub.mode, _Stub.seen = "ok", []
    yield load_pool(pool_file)
    server.shutdown()
    server.server_close()


def test_llm_curator_through_an_openai_compatible_stub_server(stub):
    cur = JitMemCurator(operators=["llm-adapt"], model="remote")
    r = cur.curate(ctx([entry()], pool=stub))
    assert r.payload == f"Task: {TASK}\nAction: {ALIGNED}" and r.notes == []
    (call,) = r.calls
    assert (call.model, call.tokens_in, call.tokens_out) == ("remote", 300, 20)
    assert call.cost_usd == pytest.approx(1e-6 * (0.05 * 300 + 0.08 * 20))  # MemPilot Eq. 14
    assert call.proxy_s == pytest.approx(0.439 + 3.6e-5 * 300 + 4.99e-3 * 20)  # Eq. 17
    assert call.latency_s > 0
    prompt = _Stub.seen[0]["messages"][0]["content"]
    assert "### Past example 1" in prompt and prompt.endswith(f"Task: {TASK}\nAction:")
    assert _Stub.seen[0]["model"] == "stub-8b" and _Stub.seen[0]["stop"][0] == "\n\n"


@pytest.mark.parametrize("mode", ["error", "slow"])
def test_endpoint_error_or_timeout_falls_back_without_losing_the_task(stub, mode):
    _Stub.mode = mode
    mem = Memory(policy=create_policy("jitmem/extractive"), max_bytes=None)
    mem.write(RAW, kind="raw")
    cur = MemPilotOrchestrator(plan=[{"z": "curate", "k": 1, "strategy": "adapt",
                                      "model": "remote"}])  # fmt: skip
    r = cur.curate(ctx([entry()], pool=stub))
    assert ALIGNED in r.payload and "failed; fell back to align" in r.notes[0]
    assert r.calls[0].ok is False and r.cost_usd == 0.0
    # the same endpoint as the JitMem curator inside the agent loop: a record, no crash
    pol = create_policy(
        "jitmem/extractive", **{"curate.operators": ["llm-brief"], "curate.model": "remote"}
    )
    mem2 = Memory(policy=pol, max_bytes=None)
    mem2.write(RAW, kind="raw")
    ex = ScriptedExecutor(lambda p: "YES" if "YES or NO" in p else " " + ALIGNED)
    rec = run_task(sql_task(), mem2, ex, AgentConfig(pool=stub), policy_name="x", seed=0, step=1)
    assert rec.local_ok and "fell back to align" in rec.curate_note
    assert rec.curator_calls == 0 and rec.curator_cost_usd == 0.0


# ------------------------------------------------------------------ write gate
def test_judge_gate_uses_the_executor_verdict_not_the_checker():
    mem = Memory(policy="jitmem/extractive", max_bytes=None)
    mem.write(RAW, kind="raw")
    # the executor solves the task (the checker says correct) but judges it a failure
    ex = ScriptedExecutor(lambda p: "NO" if "YES or NO" in p else " " + ALIGNED)
    rec = run_task(sql_task(), mem, ex, AgentConfig(), policy_name="j", seed=0, step=1)
    assert rec.local_ok and rec.judge == 0.0 and rec.judge_calls == 1
    assert len(mem) == 1  # not written
    rej = mem.decisions(action="reject")
    assert len(rej) == 1 and "judged the task not solved" in rej[0].reason
    # store-all keeps it, labelled by the judge for the curator
    mem2 = Memory(policy="jitmem/store-all", max_bytes=None)
    run_task(sql_task(), mem2, ex, AgentConfig(), policy_name="s", seed=0, step=0)
    (m,) = mem2.entries()
    assert m.meta["judge"] == 0.0 and "Outcome: success" in m.text


# ------------------------------------------------------------------ learning to curate
def test_group_relative_learning_moves_toward_the_rewarded_operator():
    cur = JitMemCurator(operators=["none", "closest", "align"], group_size=3, lr=1.0)
    x_probe = []

    def probe(payload):
        x_probe.append(payload)
        return 1.0 if ALIGNED in payload else 0.0

    for _ in range(15):
        r = cur.curate(ctx([entry()], probe=probe))
        cur.learn_outcome(1.0 if ALIGNED in r.payload else 0.0)
    r = cur.curate(ctx([entry()]))  # no probe: greedy
    assert r.operator == "align" and r.probe_calls == 0
    assert x_probe  # the candidates were really executed


def test_gdpo_decouples_objectives_and_preferences_flip_the_order():
    q, c, lat = [1.0, 1.0, 0.0], [0.01, 0.0, 0.0], [1.0, 1.0, 1.0]
    perf = gdpo_advantages(q, c, lat, (1, 0, 0))
    thrift = gdpo_advantages(q, c, lat, (1, 5, 0))
    assert perf[0] == pytest.approx(perf[1]) and perf[0] > perf[2]
    assert thrift[1] > thrift[0]  # cost now matters: the free one wins


def test_mempilot_learns_to_avoid_the_priced_model_when_cost_matters():
    pool = default_pool()
    ex = ScriptedExecutor(lambda p: "Use: " + ALIGNED)

    def train(lam_cost):
        mp = MemPilotOrchestrator(lam_cost=lam_cost, lam_latency=0.0, t_max=1, train_every=1,
                                  group_size=4, strategies=["align"], lr=1.0, seed=3)  # fmt: skip
        for _ in range(25):
            mp.curate(ctx([entry()], executor=ex, pool=pool, probe=lambda p: float(bool(p))))
        x = {"n_retrieved": 1.0, "top_overlap": 0.8, "same_table": 1.0, "n_literals": 0.4,
             "is_write": 1.0}  # fmt: skip
        return mp.choice_probs(x, "model")["expert-sim"], mp.trained

    p_cost, n = train(1.0)
    assert n == 25
    assert p_cost < 1 / 3  # started uniform over 3 models; the expert costs and adds nothing


def test_cost_and_latency_formulas_and_stages():
    pm = PoolModel("m", "openai", 0.1, 0.3, AffineLatency(0.5, 1e-4, 1e-2), {"model": "x"})
    assert pm.cost(1000, 100) == pytest.approx(1e-6 * (0.1 * 1000 + 0.3 * 100))
    assert pm.proxy(1000, 100) == pytest.approx(0.5 + 0.1 + 1.0)
    from memcurator.curate.base import CallRecord, CurateResult

    r = CurateResult("", calls=[CallRecord("a", proxy_s=1.0, stage=0),
                                CallRecord("b", proxy_s=3.0, stage=0),
                                CallRecord("c", proxy_s=2.0, stage=1)])  # fmt: skip
    assert r.proxy_s == 5.0  # Eq. 18: max within a stage, summed over stages
    with pytest.raises(InvalidInput, match="finite numbers >= 0"):
        PoolModel("m", "openai", -1.0)
    with pytest.raises(InvalidInput, match="unknown kind"):
        ModelPool([PoolModel("m", "gpu")])


def test_fixed_pipelines_do_what_they_say():
    pool = default_pool()
    ex = ScriptedExecutor(lambda p: "Use: " + ALIGNED)
    mem_entries = [entry()]
    r1 = create_policy("pipeline/retrieve-k1").curator.curate(ctx(mem_entries, pool=pool))
    assert r1.operator == "retrieve(k=1)" and r1.calls == [] and r1.payload.startswith("Task: ")
    r2 = create_policy("pipeline/curate-local").curator.curate(
        ctx(mem_entries, pool=pool, executor=ex)
    )
    assert r2.operator == "curate(local,adapt,k=3)" and r2.calls[0].cost_usd == 0.0
    r3 = create_policy("pipeline/escalate").curator.curate(ctx(mem_entries, pool=pool))
    assert r3.calls[0].model == "expert-sim" and r3.cost_usd > 0 and ALIGNED in r3.payload


def test_pool_file_errors_are_clear(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text("[[model]]\nname = 'x'\nkind = 'openai'\n")
    with pytest.raises(InvalidInput, match="needs a 'model'"):
        load_pool(bad)
    bad.write_text("not toml [")
    with pytest.raises(InvalidInput, match="not a valid model pool"):
        load_pool(bad)
    with pytest.raises(InvalidInput, match="cannot read"):
        load_pool(tmp_path / "missing.toml")


# ------------------------------------------------------------------ bench end to end (fake)
def test_bench_runs_read_time_presets_and_draws_the_fronts(tmp_path):
    from memcurator.bench.agent import copy_first_action
    from memcurator.bench.fronts import FIXED_PIPELINES, parse_preferences, register_preferences
    from memcurator.bench.report import run_metrics, summarize, write_results
    from memcurator.bench.runner import BenchConfig, load_families, run_bench
    from memcurator.bench.stream import StreamConfig

    names = register_preferences(parse_preferences("0:0,1:0"))
    pols = ["keep-all", "jitmem", "jitmem/extractive", *names, *FIXED_PIPELINES]
    cfg = BenchConfig(policies=pols, stream=StreamConfig(n_tasks=30, n_families=8))
    runs = run_bench(cfg, ScriptedExecutor(copy_first_action), families=load_families())
    by = {r.policy: run_metrics(r) for r in runs}
    assert all(len(r.records) == 30 for r in runs)  # no lost task record
    assert by["keep-all"]["curator_calls"] == 0 and np.isnan(by["keep-all"]["payload_ratio"])
    assert by["jitmem"]["probe_calls"] > 0 and by["jitmem"]["curator_calls"] > 0
    assert by["jitmem/extractive"]["curator_calls"] == 0
    assert 0 < by["jitmem/extractive"]["payload_ratio"] < 1  # payload smaller than raw
    esc = by["pipeline/escalate"]
    assert esc["curator_cost_usd"] > 0 and esc["cost_per_task"] > by["keep-all"]["cost_per_task"]
    assert esc["latency_proxy_s"] > by["pipeline/retrieve-k1"]["latency_proxy_s"]
    paths = write_results(tmp_path, runs, summarize(runs), {"tasks": 30})
    assert tmp_path / "fronts.png" in paths
    with pytest.raises(InvalidInput, match="lambda_C:lambda_L"):
        parse_preferences("0.5")


def _bandit_run(lam_cost, seed, tasks=120):
    """MemPilot on a simulated bandit: aligned evidence succeeds on 9 tasks in 10, a retrieved
    view on 5 in 10 (deterministic per task); the priced expert's evidence is the aligned one."""
    import hashlib

    pool = default_pool()
    ex = ScriptedExecutor(lambda p: "Use: " + ALIGNED)
    raws = [entry(RAW.replace("102", str(100 + i)), eid=f"e{i}") for i in range(4)]
    mp = MemPilotOrchestrator(lam_cost=lam_cost, lam_latency=0.0, t_max=1, seed=seed,
                              strategies=["align"])  # fmt: skip
    first = []
    for t in range(tasks):
        task = f"Record that member {300 + t} paid {t % 40} dollars."

        def probe(payload, task=task, t=t):
            u = int(hashlib.sha1(f"{t}|{'VALUES (' + str(300 + t) in payload}".encode())
                    .hexdigest()[:8], 16) / 2**32  # fmt: skip
            if not payload:
                return 0.0
            return float(u < (0.9 if f"VALUES ({300 + t}," in payload else 0.5))

        c = CurateContext(task, lambda q, k: raws[:k], bank=lambda: list(raws),
                          observation=SCHEMA, executor=ex, pool=pool, probe=probe)  # fmt: skip
        r = mp.curate(c)
        first.append(r.operator.split("|")[0])
    return first[-20:]


def test_mempilot_keeps_curating_with_the_free_model_when_priced_ones_cost():
    """The action type and the model are one choice: CURATE is not charged the expert's price
    when the free extractive model gives the same evidence (a cost-averse preference must not
    make the orchestrator fall back to the weaker RETRIEVE)."""
    wins = 0
    for seed in range(5):
        last = _bandit_run(lam_cost=1.0, seed=seed)
        wins += all(op.startswith("curate(extractive") or op.startswith("curate(local")
                    for op in last)  # fmt: skip
    assert wins >= 4


def test_report_of_seed_folders_draws_the_fronts_with_error_bars(tmp_path):
    from typer.testing import CliRunner

    from memcurator.bench.fronts import _seed_se
    from memcurator.cli import app

    cli = CliRunner()
    folders = []
    for s in (0, 1):
        out = tmp_path / f"s{s}"
        res = cli.invoke(app, ["bench", "--executor", "fake", "--tasks", "12", "--families", "5",
                               "--policies", "keep-all,pipeline/retrieve-k1,pipeline/escalate",
                               "--seed-start", str(s), "--out", str(out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        folders.append(out)
    merged = tmp_path / "m"
    res = cli.invoke(app, ["report", *map(str, folders), "--out", str(merged)])
    assert res.exit_code == 0, res.output
    assert (merged / "fronts.png").stat().st_size > 0
    rows = json.loads((merged / "summary.json").read_text())["summary"]
    esc = next(r for r in rows if r["policy"] == "pipeline/escalate")
    assert esc["seeds"] == 2
    assert _seed_se(esc) == pytest.approx(esc["accuracy_sd"] / np.sqrt(2))


def test_fronts_keep_zero_cost_points_on_a_wide_cost_axis(tmp_path, monkeypatch):
    """A policy that never escalates costs 0 per task; when the expert's cost widens the axis
    (log-like scale), the free points must still be drawn inside it, and with NaN sd or one
    seed the plot has no error bar but draws."""
    import memcurator.bench.plotting as plotting
    from memcurator.bench.fronts import plot_fronts

    figs = []
    save = plotting.save_png
    monkeypatch.setattr(plotting, "save_png", lambda fig, p: (figs.append(fig), save(fig, p)))
    rows = [
        {"policy": "keep-all", "accuracy": 1.0, "cost_per_task": 0.0, "latency_proxy_s": 1.0,
         "seeds": 2, "accuracy_sd": float("nan")},
        {"policy": "pipeline/retrieve-k1", "accuracy": 0.5, "cost_per_task": 1e-4,
         "latency_proxy_s": 1.2, "seeds": 1, "accuracy_sd": 0.1},
        {"policy": "pipeline/escalate", "accuracy": 0.9, "cost_per_task": 0.01,
         "latency_proxy_s": 30.0, "seeds": 2, "accuracy_sd": 0.1},
        {"policy": "mempilot", "accuracy": 0.7, "cost_per_task": 0.0, "latency_proxy_s": 2.0},
    ]  # fmt: skip
    plot_fronts(tmp_path / "fronts.png", rows)
    [fig] = figs
    ax = fig.axes[0]
    assert ax.get_xscale() != "linear"  # 1e-4 .. 1e-2: the cheap ones are kept apart
    lo, hi = ax.get_xlim()
    xs = [x for ln in ax.get_lines() for x in np.asarray(ln.get_xdata(), float)]
    assert 0.0 in xs and all(lo <= x <= hi for x in xs)
    # every cost is 0: a linear axis, the points drawn
    zero = [dict(r, cost_per_task=0.0) for r in rows]
    plot_fronts(tmp_path / "zero.png", zero)
    assert figs[-1].axes[0].get_xscale() == "linear"


def test_mempilot_state_of_another_model_restriction_is_not_loaded_into_the_wrong_rows():
    """The action factor's rows are named by the models: a state saved with other models (same
    count) must not hand one model's weights to another."""
    a = MemPilotOrchestrator(models=["local", "expert-sim"])
    a._policy(default_pool())
    a._pol._w["z0"][2] += 5.0  # curate:expert-sim strongly preferred
    b = MemPilotOrchestrator(models=["extractive", "local"])
    b.load_state(a.state())
    assert b._pol is None or not np.any(b._pol._w["z0"])
    c = MemPilotOrchestrator(models=["local", "expert-sim"])
    c.load_state(a.state())  # the same models: loaded
    assert c.choice_probs({}, "model")["expert-sim"] > 0.9
    # a state saved with the old layout (z0 = retrieve | curate, a separate model factor)
    d = c._pol._w["k"].shape[1]
    old = {"policy": {"w": {"z0": [[1.0] * d] * 2, "model": [[1.0] * d] * 3}, "updates": 4},
           "models": default_pool().names}  # fmt: skip
    fresh = MemPilotOrchestrator()
    fresh.load_state(old)
    assert not np.any(fresh._pol._w["z0"])  # old weights ignored, nothing crashed


def test_a_read_time_curator_over_curators_memory_still_tells_it_the_working_tasks():
    """curator/align reads the bank through JitMem's retriever and never recalls; the agent
    folds each task's query into CURATOR's sketch once (Memory.observe), so Keep's propensity
    and drift terms see the working tasks."""
    mem = Memory(":memory:", policy="curator/align", max_bytes=50_000)
    ex = ScriptedExecutor(lambda p: "INSERT INTO payments (member_id, amount) VALUES (205, 90);")
    for step in range(3):
        run_task(sql_task(), mem, ex, AgentConfig(), policy_name="c", seed=0, step=step)
    scorer = mem.policy._estimators["rho"].scorer
    assert scorer._n_queries == 3
    with pytest.raises(InvalidInput, match="non-empty"):
        mem.observe("  ")
    assert scorer._n_queries == 3
