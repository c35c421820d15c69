"""Prometheus text exposition of ``memcurator serve``, one namespace at a time.

Series (each labelled with ``namespace``; a key sees only its own namespace's):

- ``memcurator_requests_total{route,method,status}``: requests answered;
- ``memcurator_request_seconds{route}``: a histogram of their latencies, seconds;
- ``memcurator_decisions_total{action,reason}``: decision-log rows (admit, reject, evict, ...)
  by reason class (the reason with numbers and quoted names replaced, so the label set stays
  small);
- ``memcurator_used_bytes``, ``memcurator_max_bytes``, ``memcurator_entries``: the budget.

No client library: the text format is a few lines (Prometheus "Exposition formats", text
format 0.0.4).
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Iterable

from memcurator.types import Decision

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: latency histogram bucket upper bounds, seconds
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def reason_class(reason: str) -> str:
    """A decision reason with its numbers and quoted names replaced, cut at ``;``, 80 chars.

    Examples
    --------
    >>> reason_class("entry of 812 bytes is larger than the whole budget max_bytes=500")
    'entry of N bytes is larger than the whole budget max_bytes=N'
    >>> reason_class("evicted: lowest value 0.031; budget 1,200 bytes")
    'evicted: lowest value N'
    """
    r = reason.split(";")[0]
    r = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", r)
    r = re.sub(r"[-+]?\d[\d.,]*(?:e[-+]?\d+)?", "N", r)
    return r.strip()[:80]


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, object]]) -> str:
    body = ",".join(f'{k}="{_esc(str(v))}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


class Metrics:
    """Counters and histograms of one server process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list[float]] = {}
        self.decisions: dict[tuple[str, str, str], int] = defaultdict(int)
        self.seen_seq: dict[str, int] = defaultdict(int)

    def observe(self, namespace: str, route: str, method: str, status: int, seconds: float):
        """Count one answered request and its latency."""
        with self._lock:
            self.requests[(namespace, route, method, status)] += 1
            h = self.latency.setdefault((namespace, route), [0.0] * (len(BUCKETS) + 2))
            for i, ub in enumerate(BUCKETS):
                if seconds <= ub:
                    h[i] += 1
            h[-2] += 1  # count
            h[-1] += seconds  # sum

    def fold_decisions(self, namespace: str, rows: Iterable[Decision]) -> None:
        """Count decision-log rows newer than the last folded (``seq`` increasing)."""
        with self._lock:
            last = self.seen_seq[namespace]
            for d in rows:
                if d.seq <= last:
                    continue
                self.decisions[(namespace, d.action, reason_class(d.reason))] += 1
                self.seen_seq[namespace] = max(self.seen_seq[namespace], d.seq)

    def render(self, namespace: str, gauges: dict[str, float | None]) -> str:
        """The exposition text of ``namespace``'s series, with ``gauges`` (name -> value)."""
        ns = ("namespace", namespace)
        out = [
            "# HELP memcurator_requests_total Requests answered.",
            "# TYPE memcurator_requests_total counter",
        ]
        with self._lock:
            for (n, route, method, status), v in sorted(self.requests.items()):
                if n == namespace:
                    lab = _labels([ns, ("route", route), ("method", method), ("status", status)])
                    out.append(f"memcurator_requests_total{lab} {v}")
            out += [
                "# HELP memcurator_request_seconds Request latency, seconds.",
                "# TYPE memcurator_request_seconds histogram",
            ]
            for (n, route), h in sorted(self.latency.items()):
                if n != namespace:
                    continue
                for i, ub in enumerate(BUCKETS):
                    lab = _labels([ns, ("route", route), ("le", f"{ub:g}")])
                    out.append(f"memcurator_request_seconds_bucket{lab} {h[i]:g}")
                lab = _labels([ns, ("route", route), ("le", "+Inf")])
                out.append(f"memcurator_request_seconds_bucket{lab} {h[-2]:g}")
                lab = _labels([ns, ("route", route)])
                out.append(f"memcurator_request_seconds_count{lab} {h[-2]:g}")
                out.append(f"memcurator_request_seconds_sum{lab} {h[-1]:.6f}")
            out += [
                "# HELP memcurator_decisions_total Decision-log rows by action and reason class.",
                "# TYPE memcurator_decisions_total counter",
            ]
            for (n, action, reason), v in sorted(self.decisions.items()):
                if n == namespace:
                    lab = _labels([ns, ("action", action), ("reason", reason)])
                    out.append(f"memcurator_decisions_total{lab} {v}")
        for name, value in gauges.items():
            out.append(f"# TYPE memcurator_{name} gauge")
            shown = "+Inf" if value is None else f"{value:g}"  # None: unbounded
            out.append(f"memcurator_{name}{_labels([ns])} {shown}")
        return "\n".join(out) + "\n"


__all__ = ["BUCKETS", "CONTENT_TYPE", "Metrics", "reason_class"]
