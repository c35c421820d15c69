"""MemPilot's affine latency proxy: seconds = b + a_in * tokens_in + a_out * tokens_out.

Measured wall-clock latency is noisy (load, network); a report can also give this deterministic
proxy, with coefficients either from the paper or fitted to the completions of a run.

References
----------
MemPilot, "Orchestrating On-Demand Multimodal Memory Curation for LLM Agents", Eq. 15-16.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.llm.base import Completion


@dataclass(frozen=True)
class AffineLatency:
    """Latency proxy ``b_s + a_in_s * tokens_in + a_out_s * tokens_out``, seconds.

    Parameters
    ----------
    b_s : float, seconds
        Fixed per-call overhead.
    a_in_s : float, seconds per input token
        Marginal prefill time.
    a_out_s : float, seconds per output token
        Marginal decoding time.

    Examples
    --------
    >>> round(MEMPILOT_ORCHESTRATOR(1000, 100), 4)
    0.999
    """

    b_s: float
    a_in_s: float
    a_out_s: float

    def __call__(self, tokens_in: int, tokens_out: int) -> float:
        """Proxy latency of one call, seconds."""
        return self.b_s + self.a_in_s * tokens_in + self.a_out_s * tokens_out

    @classmethod
    def fit(cls, completions: Iterable[Completion]) -> AffineLatency:
        """Least-squares fit of the three coefficients to measured completions.

        Parameters
        ----------
        completions : iterable of Completion
            At least 3 calls with varied token counts; cached replays count with their
            original measured latency.

        Raises
        ------
        InvalidInput
            Fewer than 3 completions, or token counts that do not determine the coefficients.

        Examples
        --------
        >>> cs = [Completion("", i, o, 0.1 + 0.001 * i + 0.02 * o, 0.0, "m")
        ...       for i, o in [(10, 1), (500, 5), (100, 40), (300, 20)]]
        >>> f = AffineLatency.fit(cs)
        >>> round(f.b_s, 6), round(f.a_in_s, 6), round(f.a_out_s, 6)
        (0.1, 0.001, 0.02)
        """
        rows = [(1.0, c.tokens_in, c.tokens_out, c.latency_s) for c in completions]
        if len(rows) < 3:
            raise InvalidInput(f"fitting 3 coefficients needs >= 3 completions, got {len(rows)}")
        data = np.asarray(rows, dtype=np.float64)
        x, y = data[:, :3], data[:, 3]
        if np.linalg.matrix_rank(x) < 3:
            raise InvalidInput(
                "token counts do not vary enough to fit b, a_in and a_out separately"
            )
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        return cls(float(coef[0]), float(coef[1]), float(coef[2]))


MEMPILOT_ORCHESTRATOR = AffineLatency(0.332, 3.0e-6, 6.64e-3)
"""The coefficients MemPilot reports for its orchestrator (Eq. 16)."""
