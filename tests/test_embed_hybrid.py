"""Final hybrid scores, recency bonus, literal masking and the recall text of an entry."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import blend_scores, recall_text, recency_bonus
from memcurator.retrieve.literals import mask_literals


def test_blend_keeps_a_rare_keyword_first() -> None:
    cos = np.array([0.62, 0.60])
    bm25 = np.array([0.0, 7.3])  # only the second entry has the query's rare keyword
    assert int(np.argmax(blend_scores(cos, bm25))) == 1
    assert int(np.argmax(blend_scores(cos, bm25, lexical_weight=0.0))) == 0


@pytest.mark.parametrize(
    "cos, bm25, w",
    [([0.1], [1.0, 2.0], 0.5), ([0.1], [-1.0], 0.5), ([0.1], [np.nan], 0.5), ([0.1], [1.0], -1)],
)
def test_blend_rejects_bad_input(cos: list, bm25: list, w: float) -> None:
    with pytest.raises(InvalidInput):
        blend_scores(np.array(cos), np.array(bm25), lexical_weight=w)


def test_recency_bonus_prefers_the_newer_near_duplicate_only() -> None:
    s = recency_bonus(np.array([0.80, 0.79]), np.array([10, 400]), 500, weight=0.05)
    assert s[1] > s[0]
    s = recency_bonus(np.array([0.95, 0.70]), np.array([10, 400]), 500, weight=0.05)
    assert s[0] > s[1]  # a clearly better older entry still wins
    with pytest.raises(InvalidInput):
        recency_bonus(np.array([0.1]), np.array([1, 2]), 5)


def test_mask_literals_maps_variants_together() -> None:
    a = "Record a payment of 75 for member 102 on '2023-05-01'"
    b = "Record a payment of 90 for member 205 on '2024-01-31'"
    assert mask_literals(a) == mask_literals(b)
    assert mask_literals("table_2 col3") == "table_2 col3"


def test_recall_text_is_the_task_line() -> None:
    raw = "Task: count rows\nObservation: Table t(a INT)\nAction: SELECT 1;\nOutcome: success"
    assert recall_text(raw) == "count rows"
    assert recall_text("no task line here") == "no task line here"
    assert recall_text("Task: \nAction: x") == "Task: \nAction: x"
