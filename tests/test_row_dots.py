"""One pass over the resident matrix gives bitwise the same products as separate ones (issue 9).

The trust gate's neighbour search and the propensity's normaliser (CURATOR Eq. 3) share one pass
(:func:`memcurator.retrieve.dense.row_dots`), and the Keep pass takes ρ's matrix terms block by
block in float64 (``value.curator._matrix_terms``) instead of copying the float32 matrix whole.
Decisions must not move: the block products must equal the whole-matrix ones exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator.retrieve.dense import ROW_BLOCK, row_dots
from memcurator.value.curator import CuratorScorer, _matrix_terms


@pytest.mark.parametrize(
    "n",
    [
        0,
        1,
        7,
        ROW_BLOCK - 1,
        ROW_BLOCK,
        ROW_BLOCK + 1,
        ROW_BLOCK + 2,
        2 * ROW_BLOCK + 1,
        3 * ROW_BLOCK + 5,
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_row_dots_equal_separate_products(n, dtype):
    rng = np.random.default_rng(n)
    M = rng.standard_normal((n, 96)).astype(dtype)
    vs = [rng.standard_normal(96).astype(dtype) for _ in range(3)]
    for got, v in zip(row_dots(M, vs), vs, strict=True):
        want = M @ v
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, ROW_BLOCK, ROW_BLOCK + 1, 2 * ROW_BLOCK + 3, 5000])
def test_matrix_terms_equal_the_float64_copy(n):
    rng = np.random.default_rng(1)
    E = rng.standard_normal((n, 64)).astype(np.float32)
    sk, iv, mu_iv = rng.standard_normal(64), rng.uniform(0.5, 2, 64), rng.standard_normal(64)
    z, ee, e_mu = _matrix_terms(E, sk, iv, mu_iv)
    E64 = E.astype(np.float64)
    np.testing.assert_array_equal(z, E64 @ sk)
    np.testing.assert_array_equal(ee, np.einsum("ij,ij,j->i", E64, E64, iv))
    np.testing.assert_array_equal(e_mu, E64 @ mu_iv)


def test_matrix_terms_refuse_nan_rows_in_any_block():
    E = np.zeros((3 * ROW_BLOCK, 8), dtype=np.float32)
    E[2 * ROW_BLOCK + 1, 3] = np.nan
    with pytest.raises(Exception, match="NaN or infinite"):
        _matrix_terms(E, np.ones(8), None, None)


@pytest.mark.parametrize("mode", ["relative", "softmax", "scaled"])
def test_candidate_with_precomputed_dots_scores_the_same(mode):
    from memcurator.types import Entry

    rng = np.random.default_rng(2)
    E = rng.standard_normal((2000, 32)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    sc = CuratorScorer(dim=32, propensity=mode)
    for _ in range(4):
        sc.observe_query(rng.standard_normal(32))
    e = rng.standard_normal(32).astype(np.float32)
    e /= np.linalg.norm(e)
    m = Entry(
        id="c",
        namespace="n",
        kind="insight",
        text="Task: x\nAction: SELECT 1;",
        bytes=2200,
        raw_bytes=2200,
        embedding=e,
    )
    plain = sc.score_candidate(m, E)
    dots = row_dots(E, [e, sc.sketch_like(E)])[1]
    fused = sc.score_candidate(m, E, res_dots=dots)
    full = sc.score(
        [Entry(**{**m.__dict__, "id": str(i)}) for i in range(0)] + [m], np.vstack([E, e])[-1:]
    )  # shape check only
    assert full.rho.shape == (1,)
    for f in plain._fields:
        np.testing.assert_array_equal(getattr(plain, f), getattr(fused, f))


def test_write_after_recall_reuses_the_recall_pass(monkeypatch):
    """An agent turn (recall, then write its own record) reads the resident matrix once: the
    write's propensity normaliser comes from recall's pass. Any change to the residents or to
    the sketch in between invalidates it, and the admission verdicts do not change."""
    import memcurator.policy.trust as trust_mod
    from memcurator import Memory

    def turns(use_cache: bool) -> tuple[list[tuple[bool, str]], list[int]]:
        m = Memory(policy="curator")
        calls: list[int] = []
        real = trust_mod.row_dots

        def counting(M, vecs, *a, **kw):
            calls.append(len(vecs))
            return real(M, vecs, *a, **kw)

        monkeypatch.setattr(trust_mod, "row_dots", counting)
        out = []
        for k in range(40):
            if k % 5 != 4:
                m.recall(f"sum amount in orders for day {k}", k=1)
            if not use_cache:
                m._ctx.res.entries.sketch_dots = None
            w = m.write(
                f"Task: sum amount in orders for day {k}\n"
                f"Action: SELECT SUM(amount) FROM orders WHERE day = {k};"
            )
            out.append((w.admitted, w.reason))
        monkeypatch.undo()
        return out, calls

    cached, calls_cached = turns(True)
    fresh, calls_fresh = turns(False)
    assert cached == fresh
    # with the cache the trust gate reads the matrix only on the 8 writes not preceded by a
    # recall (k % 5 == 4); without it on every write but the first (no resident yet)
    assert sum(1 for c in calls_cached if c) == 8
    assert sum(1 for c in calls_fresh if c) == 39


def test_sketch_dots_are_invalid_after_a_change():
    from memcurator import Memory

    m = Memory(policy="curator")
    for k in range(5):
        m.write(f"Task: count rows of t{k}\nAction: SELECT COUNT(*) FROM t{k};")
    m.recall("count rows of t1", k=1)
    res = m._ctx.res
    v = m.policy.admission_sketch(res.matrix)
    assert v is not None
    np.testing.assert_array_equal(res.entries.cached_dots(v), res.matrix @ v)
    m.write("Task: count rows of t9\nAction: SELECT COUNT(*) FROM t9;")
    assert res.entries.cached_dots(v) is None  # a row was added
    m.recall("count rows of t2", k=1)
    v2 = m.policy.admission_sketch(res.matrix)
    assert res.entries.cached_dots(v) is None  # the sketch moved
    np.testing.assert_array_equal(res.entries.cached_dots(v2), res.matrix @ v2)
    m.forget(m.entries()[0].id)
    assert res.entries.cached_dots(v2) is None  # a row was removed
