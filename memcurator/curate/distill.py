"""The curate package's name for :mod:`memcurator.distill` (raw trajectory text, its insight and
the extractive distiller), which sits below the trust and lifecycle layers that use it."""

from memcurator.distill import ExtractiveDistiller, render_insight, render_raw

__all__ = ["ExtractiveDistiller", "render_insight", "render_raw"]
