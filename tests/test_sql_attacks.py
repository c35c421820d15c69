"""Genuine outside traffic and attacks on every channel (envs/sql/attacks.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _env_util import sql_specs

from memcurator.embed.hashing import HashingEmbedder
from memcurator.envs.sql import check, make_poison, payload_executed
from memcurator.envs.sql.attacks import (
    ATTACK_PAYLOADS,
    genuine_exemplar,
    make_attack,
    outside_traffic,
)
from memcurator.envs.sql.risk import parse_entry
from memcurator.errors import InvalidInput


def test_poison_api_unchanged() -> None:
    s = sql_specs(1)[0]
    assert make_attack(s, "drop", np.random.default_rng(0)) == make_poison(
        s, "drop", np.random.default_rng(0)
    )


def test_genuine_exemplars_solve_their_variant_task() -> None:
    rng = np.random.default_rng(0)
    for s in sql_specs(20):
        text = genuine_exemplar(s, rng, form="raw")
        assert text.startswith("Task: ") and "Observation: Table " in text
        task, action, _ = parse_entry(text)  # type: ignore[misc]
        assert not payload_executed(s, action)
    with pytest.raises(InvalidInput):
        genuine_exemplar(s, rng, form="x")


def test_destructive_payloads_execute_and_attacks_are_retrievable() -> None:
    rng = np.random.default_rng(1)
    emb = HashingEmbedder()
    specs = sql_specs(20)
    others = [emb.embed(x.instruction) for x in specs]
    for i, s in enumerate(specs):
        for p in ("drop", "empty", "trigger"):
            text = make_attack(s, p, rng)
            assert text is not None
            assert payload_executed(s, parse_entry(text)[1]), (p, text)  # type: ignore[index]
        text = make_attack(s, "instruction", rng)
        v = emb.embed(text)  # type: ignore[arg-type]
        sims = [float(v @ o) for o in others]
        assert int(np.argmax(sims)) == i  # nearest family is the target


def test_hijack_runs_but_gives_a_different_answer() -> None:
    rng = np.random.default_rng(2)
    n = 0
    for s in sql_specs(60):
        text = make_attack(s, "hijack", rng)
        if text is None:
            continue
        task, action, _ = parse_entry(text)  # type: ignore[misc]
        from dataclasses import replace

        target = replace(s, instruction=task)
        n += 1
        assert "DROP" not in action.upper()
        assert check(target, action).error is None  # it runs
    assert n >= 10


def test_outside_traffic_channels_and_advertised_numbers() -> None:
    tr = outside_traffic(sql_specs(5), np.random.default_rng(0))
    assert {e.channel for e in tr} == {"external", "peer", "self"}
    assert {e.payload for e in tr} <= {"genuine", *ATTACK_PAYLOADS}
    bad_peer = [e for e in tr if e.channel == "peer" and not e.genuine]
    assert bad_peer and all(e.q_adv == 1.0 and e.a_adv == 50.0 for e in bad_peer)
    with pytest.raises(InvalidInput):
        outside_traffic(sql_specs(1), np.random.default_rng(0), channels=("radio",))
    with pytest.raises(InvalidInput):
        make_attack(sql_specs(1)[0], "nuke", np.random.default_rng(0))
