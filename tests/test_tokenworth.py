"""TokenWorth learner (Sec. 4.2-4.3) and worth-guided lifecycle (Sec. 4.4)."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

from memcurator.errors import InvalidInput
from memcurator.value.tokenworth import (
    BASE_FEATURES,
    MemoryStats,
    TokenWorthLearner,
    features,
    features_many,
    pair_feature_names,
)
from memcurator.value.tokenworth_lifecycle import (
    WriteDecision,
    WriteParams,
    decide_write,
    probe_worths,
)

N_PAIR = 12
PAIRS = pair_feature_names(N_PAIR)
PLANTED = (3, 7)  # pair dims the true worth depends on


def synthetic(rng: np.random.Generator, n: int) -> tuple[list[dict[str, float]], np.ndarray]:
    """Inputs shaped like ``features`` output; true worth = 0.5·relevance + g(pair_03, pair_07).

    ``g`` is non-linear with no linear component in the pair dims, so the base scorer cannot see
    it and only the residual RFM can.
    """
    xs, truth = [], []
    for _ in range(n):
        x = {
            "relevance": rng.uniform(-0.2, 0.8),
            "success": rng.uniform(-1, 1),
            "usage": math.log1p(rng.poisson(2)),
            "recency": rng.uniform(0, 1),
        }
        p = rng.normal(0.0, 0.05, N_PAIR)
        x.update(zip(PAIRS, p.tolist(), strict=True))
        a, b = p[PLANTED[0]] / 0.05, p[PLANTED[1]] / 0.05
        g = math.tanh(a * b) + 0.5 * (math.tanh(a) ** 2 - 0.5)
        truth.append(0.5 * x["relevance"] + g)
        xs.append(x)
    return xs, np.array(truth)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(0)
    xs, truth = synthetic(rng, 1800)
    ys = (truth + rng.normal(0.0, 0.3, len(truth))).tolist()
    test_xs, test_truth = synthetic(rng, 500)
    return xs, ys, test_xs, test_truth


@pytest.fixture(scope="module")
def fitted(stream):
    xs, ys, _, _ = stream
    out = {}
    # the learner settings of the tokenworth presets (memcurator.policy.presets)
    for name, kw in {
        "tokenworth": {},
        "tokenworth/base-only": {"residual": False},
        "tokenworth/no-agop": {"agop": False},
    }.items():
        learner = TokenWorthLearner(**kw)
        learner.learn_many(xs, ys)
        out[name] = learner
    return out


# ---------------------------------------------------------------- learner: behaviour
def test_full_learner_ranks_better_than_base_only(stream, fitted):
    _, _, test_xs, test_truth = stream
    rho = {k: spearman(v.score_many(test_xs), test_truth) for k, v in fitted.items()}
    assert rho["tokenworth"] > rho["tokenworth/base-only"] + 0.05, rho
    assert rho["tokenworth"] > rho["tokenworth/no-agop"], rho


def test_agop_metric_weights_planted_dims(fitted):
    learner = fitted["tokenworth"]
    m = learner.metric
    assert set(m) == set(BASE_FEATURES) | set(PAIRS)
    planted = [m[PAIRS[i]] for i in PLANTED]
    rest = [v for k, v in m.items() if k not in {PAIRS[i] for i in PLANTED}]
    assert np.mean(planted) > 3 * np.mean(rest)
    assert min(planted) > max(rest)
    w = np.array(list(m.values()))
    assert np.isclose(w.mean(), 1.0)
    assert w.min() > 0


def test_no_agop_keeps_identity_metric(fitted):
    assert all(v == 1.0 for v in fitted["tokenworth/no-agop"].metric.values())


def test_base_only_ignores_residual(stream, fitted):
    base = fitted["tokenworth/base-only"]
    assert base.eta == 0.0 and base.n_krr_fits == 0
    _, _, test_xs, _ = stream
    w = base.base_weights
    expect = [sum(w[k] * x[k] for k in BASE_FEATURES) for x in test_xs[:20]]
    assert np.allclose(base.score_many(test_xs[:20]), expect)


def test_schedule_and_eta_ramp():
    rng = np.random.default_rng(1)
    xs, truth = synthetic(rng, 300)
    learner = TokenWorthLearner()
    w0 = dict(learner.base_weights)
    for i, (x, y) in enumerate(zip(xs, truth, strict=True), start=1):
        learner.learn_one(x, float(y))
        if i == 49:
            assert learner.base_weights == w0  # first base refit at 50
        if i == 74:
            assert learner.n_krr_fits == 0 and learner.eta == 0.0
        if i == 75:
            assert learner.n_krr_fits == 1 and math.isclose(learner.eta, 0.1 / 3)
        if i == 150:
            assert learner.n_krr_fits == 2
        if i == 225:  # scheduled fit + AGOP refit
            assert learner.n_krr_fits == 4 and math.isclose(learner.eta, 0.1)
    assert learner.base_weights != w0
    assert learner.n_seen == 300


def test_prior_before_any_feedback():
    learner = TokenWorthLearner()
    x = {"relevance": 0.5, "success": 0.0, "usage": 0.0, "recency": 1.0}
    assert math.isclose(learner.score_one(x), 0.5 + 0.02)


# ---------------------------------------------------------------- learner: contract
def test_same_seed_same_scores(stream):
    xs, ys, test_xs, _ = stream
    a, b = TokenWorthLearner(seed=7), TokenWorthLearner(seed=7)
    a.learn_many(xs[:700], ys[:700])
    for x, y in zip(xs[:700], ys[:700], strict=True):
        b.learn_one(x, y)
    assert np.array_equal(a.score_many(test_xs), b.score_many(test_xs))
    assert a.metric == b.metric


def test_inputs_not_mutated(stream):
    xs, ys, test_xs, _ = stream
    xs_copy, ys_copy, t_copy = copy.deepcopy(xs[:300]), list(ys[:300]), copy.deepcopy(test_xs)
    learner = TokenWorthLearner()
    learner.learn_many(xs[:300], ys[:300])
    learner.score_many(test_xs)
    learner.score_one(test_xs[0])
    assert xs[:300] == xs_copy and ys[:300] == ys_copy and test_xs == t_copy

    q = np.linspace(-1, 1, 32)
    mems = np.stack([np.roll(q, i) for i in range(3)])
    q0, m0 = q.copy(), mems.copy()
    st = [{"successes": 1, "failures": 0, "uses": 1, "age": 2}] * 3
    features_many(q, mems, st, n_blocks=4)
    decide_write(q, [0.2], mems, np.array([0.1, 0.2, 0.3]), capacity=3)
    assert np.array_equal(q, q0) and np.array_equal(mems, m0)


def test_pickle_round_trip(stream, fitted):
    _, _, test_xs, _ = stream
    learner = fitted["tokenworth"]
    back = pickle.loads(pickle.dumps(learner))
    assert np.array_equal(back.score_many(test_xs), learner.score_many(test_xs))
    back.learn_one(test_xs[0], 1.0)  # still learns after unpickling
    assert back.n_seen == learner.n_seen + 1


def test_clone_keeps_parameters_and_forgets_state(fitted):
    learner = fitted["tokenworth/no-agop"]
    fresh = learner.clone()
    assert fresh.agop is False and fresh.n_seen == 0
    assert repr(fresh) == "TokenWorthLearner(agop=False)"
    assert fresh.clone(gamma=2.0).gamma == 2.0


@pytest.mark.parametrize("y", [float("nan"), float("inf"), "1.0", None, True])
def test_bad_target_raises(y):
    x = {"relevance": 0.5, "success": 0.0, "usage": 0.0, "recency": 1.0}
    with pytest.raises(InvalidInput):
        TokenWorthLearner().learn_one(x, y)


def test_bad_features_raise():
    learner = TokenWorthLearner()
    x = {"relevance": 0.5, "success": 0.0, "usage": 0.0, "recency": 1.0, "pair_00": 0.1}
    with pytest.raises(InvalidInput, match="recency"):
        learner.score_one({k: v for k, v in x.items() if k != "recency"})
    with pytest.raises(InvalidInput):
        learner.learn_one(dict(x, relevance=float("nan")), 1.0)
    with pytest.raises(InvalidInput):
        learner.learn_one([0.5, 0.0], 1.0)  # type: ignore[arg-type]
    learner.learn_one(x, 1.0)
    with pytest.raises(InvalidInput, match="pair_00"):
        learner.learn_one({k: v for k, v in x.items() if k != "pair_00"}, 1.0)
    with pytest.raises(InvalidInput, match="pair_01"):
        learner.score_one(dict(x, pair_01=0.0))
    with pytest.raises(InvalidInput):
        learner.learn_many([x, x], [1.0])


@pytest.mark.parametrize(
    "kw",
    [
        {"w0": (1.0, 0.1)},
        {"krr_every": 0},
        {"beta_m": 1.5},
        {"gamma": 0.0},
        {"base_loss": "max"},
        {"metric_bounds": (2.0, 8.0)},
    ],
)
def test_bad_parameters_raise(kw):
    with pytest.raises(InvalidInput):
        TokenWorthLearner(**kw)


# ---------------------------------------------------------------- features
def test_features_definition():
    rng = np.random.default_rng(3)
    q, m = rng.normal(size=64), rng.normal(size=64)
    x = features(q, m, MemoryStats(successes=4, failures=2, uses=6, age=10), n_blocks=8)
    assert list(x)[:4] == list(BASE_FEATURES) and len(x) == 12
    cos = q @ m / np.linalg.norm(q) / np.linalg.norm(m)
    assert math.isclose(x["relevance"], cos)
    assert math.isclose(sum(x[k] for k in pair_feature_names(8)), cos)
    assert math.isclose(x["success"], 2 / 8)
    assert math.isclose(x["usage"], math.log1p(6))
    assert math.isclose(x["recency"], math.exp(-0.2))
    with pytest.raises(InvalidInput):
        features(q, m[:32], MemoryStats())
    with pytest.raises(InvalidInput):
        features(q, m, {"successes": 1, "failures": 0, "uses": 1})  # no age
    with pytest.raises(InvalidInput):
        features(q, m, MemoryStats(successes=-1))


def test_hashing_embedder_features_feed_the_learner():
    from memcurator.embed.hashing import HashingEmbedder

    emb = HashingEmbedder()
    q = emb.embed("insert a payment for member 102")
    mems = emb.embed_many(["INSERT INTO payments VALUES (102, 5)", "list all rivers in europe"])
    xs = features_many(q, mems, [MemoryStats(1, 0, 1, 3), MemoryStats()])
    learner = TokenWorthLearner()
    s = learner.score_many(xs)
    assert s.shape == (2,) and s[0] > s[1]
    assert len(xs[0]) == 4 + 16


# ---------------------------------------------------------------- lifecycle (Sec. 4.4)
def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def test_lifecycle_scripted_sequence():
    cap = 3
    bank: list[np.ndarray] = []
    worths: list[list[float]] = []  # per-probe worth of each resident, 2 probes
    log: list[WriteDecision] = []

    def write(emb, cw, success=True):
        d = decide_write(
            emb,
            cw,
            np.array(bank).reshape(len(bank), 4),
            np.array(worths).reshape(len(bank), 2),
            cap,
            success=success,
        )
        log.append(d)
        if d.action == "admit":
            if d.victim_index is not None:
                del bank[d.victim_index], worths[d.victim_index]
            bank.append(_unit(emb)), worths.append(list(cw))
        elif d.action == "replace":
            bank[d.victim_index], worths[d.victim_index] = _unit(emb), list(cw)
        assert len(bank) <= cap
        return d

    # 1. admit while room remains (even low-worth, near-duplicate candidates)
    for e, w in [
        ([1, 0, 0, 0], [0.30, 0.20]),
        ([0, 1, 0, 0], [0.10, 0.00]),
        ([1, 0.05, 0, 0], [0.04, 0.04]),
    ]:
        d = write(e, w)
        assert d.action == "admit" and d.victim_index is None and "capacity remains" in d.reason
    # 2. failed interaction: rejected despite its high worth
    d = write([0, 0, 1, 0], [0.9, 0.9], success=False)
    assert d.action == "reject" and d.victim_index is None and "failed" in d.reason
    # 3. full + novel (orthogonal to every resident): admit, evict lowest-worth (#2, 0.04)
    d = write([0, 0, 1, 0], [0.0, -0.1])
    assert d.action == "admit" and d.victim_index == 2 and "novel" in d.reason
    assert math.isclose(d.score, -0.05)
    # bank: e0 (0.25), e1 (0.05), e2 (-0.05)
    # 4. full, not novel (near e0), worth 0.40 >= best 0.25 + 0.02, positive ratio 1.0: admit
    d = write([1, 0.1, 0, 0], [0.45, 0.35])
    assert d.action == "admit" and d.victim_index == 2 and "beats best resident" in d.reason
    # bank: e0 (0.25), e1 (0.05), e3 (0.40)
    # 5. near e1 (worth 0.05), not above best 0.40, gain 0.15 >= 0.10: replace e1
    d = write([0.05, 1, 0, 0], [0.20, 0.20])
    assert d.action == "replace" and d.victim_index == 1 and "replaces" in d.reason
    # 6. near e1' (0.20) with gain 0.05 < 0.10, not novel, below best: reject
    d = write([0.0, 1, 0.05, 0], [0.25, 0.25])
    assert d.action == "reject" and d.victim_index is None and "delta_rep" in d.reason
    # 7. margin rule needs the positive ratio: worth above best but mostly negative probes
    d = decide_write(
        [1, 0.1, 0, 0], [2.0, -0.1, -0.1], np.array(bank), np.array([0.25, 0.2, 0.4]), cap
    )
    assert d.action == "replace" and d.victim_index == 2  # gain 0.2 over its twin e3
    assert len(bank) == cap and all(isinstance(x.reason, str) and x.reason for x in log)


def test_lifecycle_bad_input_and_params():
    bank = np.eye(3)
    with pytest.raises(InvalidInput):
        decide_write([1, 0, 0], [], bank, np.zeros(3), 3)
    with pytest.raises(InvalidInput):
        decide_write([1, 0, 0], [0.1], bank, np.zeros(2), 3)
    with pytest.raises(InvalidInput):
        decide_write([1, 0, 0], [0.1], bank, np.zeros(3), 0)
    with pytest.raises(InvalidInput):
        decide_write([1, 0, float("nan")], [0.1], bank, np.zeros(3), 3)
    with pytest.raises(InvalidInput):
        WriteParams(replace_k=0)
    # replace_k > 1 picks the lowest-worth among the k nearest
    worths = np.array([0.5, 0.0, 0.4])
    c = [1.0, 0.2, 0.1]
    assert decide_write(c, [0.45], bank, worths, 3).action == "reject"
    d = decide_write(c, [0.45], bank, worths, 3, params=WriteParams(replace_k=2))
    assert d.action == "replace" and d.victim_index == 1


def test_probe_worths_shape_and_values(fitted):
    rng = np.random.default_rng(5)
    learner = TokenWorthLearner()
    probes, mems = rng.normal(size=(3, 48)), rng.normal(size=(5, 48))
    st = [MemoryStats(1, 1, 2, 4)] * 5
    W = probe_worths(learner, probes, mems, st, n_blocks=N_PAIR)
    assert W.shape == (5, 3)
    x = features(probes[1], mems[2], st[2], n_blocks=N_PAIR)
    assert math.isclose(W[2, 1], learner.score_one(x))
    W2 = probe_worths(fitted["tokenworth"], probes, mems, st, n_blocks=N_PAIR)
    assert W2.shape == (5, 3) and np.all(np.isfinite(W2))
