"""``POST /v1/embeddings``: OpenAI-compatible embeddings by the namespace's own embedder."""

from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter

from memcurator.embed.text import word_tokens
from memcurator.errors import InvalidInput
from memcurator.service.models import (
    EmbeddingOut,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbeddingsUsage,
)
from memcurator.service.routes.deps import Key, Pool

router = APIRouter(tags=["memory"])


def _vectors(emb: object, texts: list[str], dim: int) -> np.ndarray:
    """``texts`` embedded, float32 of shape (len(texts), dim) (one batch when the embedder has
    ``embed_many``)."""
    many = getattr(emb, "embed_many", None)
    rows = many(texts) if many is not None else [emb.embed(x) for x in texts]  # type: ignore[attr-defined]
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), dim)


@router.post("/v1/embeddings", response_model=EmbeddingsResponse)
def embeddings(body: EmbeddingsRequest, key: Key, pool: Pool) -> EmbeddingsResponse:
    """OpenAI-compatible embeddings by the namespace's own embedder (read scope).

    Any OpenAI client, and :class:`~memcurator.embed.openai_compat.OpenAICompatEmbedder`,
    can embed with it. Each input is embedded as given (a memory embeds only an entry's
    recall line); nothing is stored and nothing enters the decision log.
    """
    key.require("read")
    texts = [body.input] if isinstance(body.input, str) else list(body.input)
    with pool.using(key) as t:
        emb = t.memory.embedder
        ident, dim = emb.name, int(emb.dim)
        if body.dimensions is not None and body.dimensions != dim:
            raise InvalidInput(
                f"dimensions={body.dimensions}: this namespace's embedder ({ident}) gives {dim}"
            )
        vecs = _vectors(emb, texts, dim)
    ntok = sum(len(word_tokens(x)) for x in texts)
    b64 = body.encoding_format == "base64"
    data = [
        EmbeddingOut(
            index=i,
            embedding=(
                base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                if b64
                else [float(x) for x in v]
            ),
        )
        for i, v in enumerate(vecs)
    ]
    return EmbeddingsResponse(
        data=data, model=ident, usage=EmbeddingsUsage(prompt_tokens=ntok, total_tokens=ntok)
    )


__all__ = ["router"]
