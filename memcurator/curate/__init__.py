"""Curators: turn stored entries into what is injected (distillers, read-time curators)."""

from memcurator.distill import ExtractiveDistiller, render_insight, render_raw

__all__ = ["ExtractiveDistiller", "render_raw", "render_insight"]
