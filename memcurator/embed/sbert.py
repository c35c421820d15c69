"""Optional sentence-transformers embedder (``pip install sentence-transformers``)."""

from __future__ import annotations

import numpy as np

from memcurator.embed.text import check_text


class SentenceTransformerEmbedder:
    """Wrap a locally available sentence-transformers model; vectors are L2-normalized.

    Parameters
    ----------
    model : str
        Model name or local path. Nothing is downloaded by memcurator itself.
    """

    def __init__(self, model: str = "all-MiniLM-L6-v2"):
        self.model = model
        from sentence_transformers import SentenceTransformer

        self._m = SentenceTransformer(model)
        self.dim = int(self._m.get_sentence_embedding_dimension())

    @property
    def name(self) -> str:
        return f"sbert-{self.model}-{self.dim}"

    def embed(self, text: str) -> np.ndarray:
        check_text(text)
        v = np.asarray(self._m.encode([text], normalize_embeddings=True)[0], dtype=np.float32)
        return v
