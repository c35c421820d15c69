"""CURATOR's Trust gate plus a duplicate test for self-derived entries of the same request.

A solved task writes its trajectory; a stream of variants of one request ("member 102 paid 75",
"member 205 paid 90") writes near-copies of one exemplar again and again. Each copy is a new,
unproven entry that competes with the resident one for the same bytes (issue 11, cause 4). This
gate rejects a self-derived write whose resident near-twin already does the job.

References
----------
CURATOR, Alg. 1 lines 18-22 (Trust: ρ > θ); line 15 (redundancy δ, here applied at admission).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Verdict
from memcurator.policy.components import Component
from memcurator.retrieve.literals import mask_literals
from memcurator.types import Entry

_ACTION = re.compile(r"^Action:\s*(.+)$", re.MULTILINE)


def action_skeleton(text: str) -> str:
    """The entry's actions with literals masked and whitespace and case normalised.

    Two variants of one request share a skeleton; the same request after a schema migration
    (a renamed table or column) does not.

    Examples
    --------
    >>> action_skeleton("Task: x\\nAction: UPDATE t SET a = 5 WHERE id = 'k';")
    'update t set a = # where id = #;'
    >>> action_skeleton("Task: y")
    ''
    """
    acts = _ACTION.findall(text)
    return " | ".join(" ".join(mask_literals(a, "#").lower().split()) for a in acts)


class SameRequestDedup(Component):
    """A same-request duplicate test for self-derived writes, in front of any admit component.

    A self-derived candidate is rejected when a resident self-derived entry *of the same
    request* is in good standing (no more failures than successes); every other candidate goes
    to the wrapped gate (``admit``, default CURATOR's ``trust-gate``). Same request means, by
    ``match``:

    - ``"skeleton"`` (default): cosine ≥ ``min_cosine`` and the same action skeleton
      (:func:`action_skeleton`: the SQL with literals masked). A migrated family's new exemplar
      has another skeleton (renamed table/column), so drift is never blocked.
    - ``"family"``: the same ``meta["family"]`` and the same skeleton (a benchmark reading that
      needs the task's family label).

    Parameters
    ----------
    admit : dict, optional
        The wrapped admit component's spec (``{"name": ..., **params}``); default
        ``{"name": "trust-gate"}``.
    match : {"skeleton", "family"}, default "skeleton"
    min_cosine : float, default 0.6
        Cosine needed under ``"skeleton"``, besides the same skeleton. Entries are embedded by
        their task line (issue 9's recall text); two variants of one request that differ in
        both literals ("Member 102 paid 75" / "Member 205 paid 90") have cosine 0.71 there, so
        the skeleton (the SQL with literals masked) does most of the work.

    Raises
    ------
    InvalidInput
        Unknown ``match``, ``min_cosine`` outside [-1, 1], or a wrapped dedup.
    """

    decision = "admit"

    def __init__(
        self,
        admit: dict[str, Any] | None = None,
        match: str = "skeleton",
        min_cosine: float = 0.6,
    ):
        from memcurator.policy.components import create_component

        self.admit_spec = admit
        self.match = match
        self.min_cosine = min_cosine
        if match not in ("skeleton", "family"):
            raise InvalidInput(f"match must be 'skeleton' or 'family', got {match!r}")
        if not -1.0 <= float(min_cosine) <= 1.0:
            raise InvalidInput(f"min_cosine must be in [-1, 1], got {min_cosine!r}")
        spec = dict(admit) if admit is not None else {"name": "trust-gate"}
        if spec.get("name") == "same-request-dedup":
            raise InvalidInput("same-request-dedup cannot wrap itself")
        self._inner = create_component("admit", spec)
        self.needs = tuple(self._inner.needs)
        # the wrapped gate's probation (admitted unproven entries are not injected) holds
        self.probation = bool(getattr(self._inner, "probation", False))
        self.agreement = getattr(self._inner, "agreement", None)

    def get_params(self) -> dict[str, Any]:
        return {"admit": self.admit_spec, "match": self.match, "min_cosine": self.min_cosine}

    def bind(self, dim: int, estimators: Mapping[str, Any], policy_name: str) -> None:
        super().bind(dim, estimators, policy_name)
        self._inner.bind(dim, estimators, policy_name)

    def twin(self, candidate: Entry, resident: list[Entry], E: np.ndarray) -> Entry | None:
        """The resident entry in good standing that ``candidate`` duplicates, or None."""
        if candidate.origin != "self" or not resident:
            return None
        sk = action_skeleton(candidate.text)
        if not sk:
            return None
        M = np.asarray(E, dtype=np.float64).reshape(len(resident), -1)
        cos = M @ np.asarray(candidate.embedding, dtype=np.float64)
        for i in np.argsort(-cos, kind="stable"):
            m = resident[int(i)]
            if m.origin != "self" or m.failures > m.successes:
                continue
            if self.match == "family":
                fam = candidate.meta.get("family")
                if fam is None or m.meta.get("family") != fam:
                    continue
            elif cos[i] < self.min_cosine:
                break
            if action_skeleton(m.text) == sk:
                return m
        return None

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        dup = self.twin(candidate, resident, E)
        if dup is not None:
            return Verdict(
                False,
                float("nan"),
                f"duplicate of resident {dup.id} (same request: {self.match} match, "
                f"{dup.successes} successes / {dup.failures} failures); not admitted",
            )
        return self._inner.admit(candidate, resident, E, step)  # type: ignore[attr-defined,no-any-return]


__all__ = ["SameRequestDedup", "action_skeleton"]
