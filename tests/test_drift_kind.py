"""Issue 11, cause 5: after a schema drift, curator dropped a migrated family's new exemplars.

With η = s·z (z the RMS z-score from the working-task centroid, ≈ 1 for a typical entry), every
entry's harm exceeded its value on the SQL stream, so Keep ranked by closeness to the centroid
alone and evicted the migrated family's new exemplars at their own write. ``eta_offset`` charges
only the distance beyond a typical entry's; ``curator/eta-offset`` is that preset.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.bench.agent import AgentConfig, copy_first_action, run_task
from memcurator.bench.runner import load_families
from memcurator.bench.stream import StreamConfig, build_stream
from memcurator.errors import InvalidInput
from memcurator.llm import create_executor
from memcurator.value.curator import CuratorScorer


def test_eta_offset_charges_only_atypical_entries() -> None:
    rng = np.random.default_rng(0)
    sc0, sc1 = CuratorScorer(dim=16), CuratorScorer(dim=16, eta_offset=1.0)
    for _ in range(200):
        q = rng.normal(size=16)
        q /= np.linalg.norm(q)
        sc0.observe_query(q)
        sc1.observe_query(q)
    typical = rng.normal(size=16)
    typical /= np.linalg.norm(typical)
    outlier = typical * 6.0
    kw = {"b": np.full(2, 100.0), "a": np.ones(2), "q": np.full(2, 0.1), "s": np.ones(2),
          "psi": np.zeros((2, 5))}  # fmt: skip
    E = np.vstack([typical, outlier])
    e0, e1 = sc0.score_arrays(E, **kw).eta, sc1.score_arrays(E, **kw).eta
    assert e0[0] > 0.5 and e1[0] < 0.2 * e0[0]  # a typical entry (z ≈ 1) pays ~no harm
    assert e1[1] == pytest.approx(e0[1] - 1.0)  # an outlier pays the excess
    with pytest.raises(InvalidInput, match="eta_offset"):
        CuratorScorer(dim=4, eta_offset=-1.0)


def _current_resident_share(policy: str, seed: int) -> tuple[float, int]:
    """Share of victim tasks with a current (post-drift) same-family entry resident, and how
    many of the migrated families' current entries left memory by the 'lowest rho' rule."""
    cfg = StreamConfig(n_tasks=150, n_families=30, dml_share=0.8, drift_popular=True, seed=seed)
    stream = build_stream(cfg, load_families())
    ex = create_executor("fake", responder=copy_first_action)
    mem = Memory(policy=policy, max_bytes=40_000, seed=seed, vector_dtype="float32")
    has_current: list[bool] = []
    fam_of: dict[str, tuple[str, int]] = {}
    for step, task in enumerate(stream.tasks):
        if task.subset == "victim":
            has_current.append(
                any(
                    m.meta.get("family") == task.family and m.created_step >= stream.drift_step
                    for m in mem.entries()
                )
            )
        n_dec = len(mem.decisions())
        run_task(task, mem, ex, AgentConfig(), policy_name=policy, seed=seed, step=step)
        for d in mem.decisions()[n_dec:]:
            if d.action == "admit":
                fam_of[d.entry_id] = (task.family, step)
    lost = sum(
        1
        for d in mem.decisions()
        if d.action == "evict"
        and "lowest net-value density" in d.reason
        and fam_of.get(d.entry_id, ("", -1))[0] in stream.drifted
        and fam_of[d.entry_id][1] >= stream.drift_step
    )
    return float(np.mean(has_current)), lost


@pytest.mark.parametrize("seed", [0, 2])
def test_migrated_family_keeps_a_current_exemplar_with_the_offset(seed: int) -> None:
    """A DML-heavy stream with drift on popular families (the setting of cause 5)."""
    before, lost_before = _current_resident_share("curator", seed)
    after, lost_after = _current_resident_share("curator/eta-offset", seed)
    # The failure measured before the issue-9 ranking changes (newer versions win, superseded
    # near-duplicates) was a residency under 0.35 on these seeds; those changes lifted plain
    # curator to about 0.45-0.52 here, and the offset still adds to it.
    assert before < 0.6  # a large share of victim tasks still finds no current exemplar
    assert after >= 0.5 and after > before
    assert lost_after < lost_before


def test_stream_options_dml_share_and_drift_popular() -> None:
    fams = load_families()
    kinds = {f.family: f.kind for f in fams}
    s = build_stream(StreamConfig(n_tasks=200, n_families=30, dml_share=0.8, seed=3), fams)
    assert sum(kinds[f] != "select" for f in s.families) == 24
    plain = build_stream(StreamConfig(n_tasks=200, n_families=30, seed=3), fams)
    assert sum(kinds[f] != "select" for f in plain.families) < 24
    pop = build_stream(StreamConfig(n_tasks=200, n_families=30, seed=3, drift_popular=True), fams)
    assert [t.family for t in pop.tasks[: pop.drift_step]] == [
        t.family for t in plain.tasks[: plain.drift_step]
    ]  # same draws before the drift
    before = [t.family for t in pop.tasks[: pop.drift_step]]
    counts = {f: before.count(f) for f in set(before)}
    assert min(counts[f] for f in pop.drifted) >= max(
        counts[f] for f in counts if f not in pop.drifted and f not in _targets(pop)
    )
    with pytest.raises(InvalidInput, match="dml_share"):
        StreamConfig(dml_share=1.5)


def _targets(stream: object) -> set[str]:
    poison = getattr(stream, "poison", None)
    return set(poison.targets) if poison is not None else set()
