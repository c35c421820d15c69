"""Task data of the benchmark's environments for tests."""

from __future__ import annotations

from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql import load_specs


def sql_specs(n: int) -> list[SQLTaskSpec]:
    """The first ``n`` SQL task specs of the LifelongAgentBench data (``sample_index`` order)."""
    return list(load_specs().specs)[:n]
