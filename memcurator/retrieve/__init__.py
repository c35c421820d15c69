"""Candidate recall: BM25 (bm25s), dense cosine, and their reciprocal-rank fusion."""

from memcurator.retrieve.bm25 import BM25Index
from memcurator.retrieve.dense import dense_topk, row_dots
from memcurator.retrieve.fusion import rrf_fuse

__all__ = ["BM25Index", "dense_topk", "row_dots", "rrf_fuse"]
