"""Presets as plain data: a name → a policy spec (components and their parameters).

Every paper's method, its ablations and the baselines are here, one table each; ``base``
inherits another preset and overrides parts of it (deep merge). The same shape loads from a TOML
or JSON file (:func:`load_policy_file`), so a user can define a policy without code::

    # my-policy.toml
    [my-curator]
    base = "curator"
    description = "CURATOR with a stricter Trust gate"
    admit = { name = "rho-trust", theta = 0.05 }
    [my-curator.estimators.rho]
    lam = 2.0
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput

_RHO_KEEP: dict[str, Any] = {"name": "rho-density", "distill": True, "redundancy_delta": 0.85}

_MARGIN_KEEP: dict[str, Any] = {
    "name": "quarantine",
    "keep": {
        "name": "rho-density-margin",
        "distill": True,
        "redundancy_delta": 0.85,
        "margin": 0.5,
        "min_successes": 2,
    },
}

_CURATOR: dict[str, Any] = {
    "description": "CURATOR: one net-value density rho = (V - lam*H)/b for keep, trust, share; "
    "trust gated on content risk and net value for every verified origin, feedback quarantine",
    "estimators": {"rho": {}, "reputation": {}},
    "admit": {"name": "trust-gate", "theta": -0.5},
    "form": {"name": "form", "kind": "raw"},
    "keep": {"name": "quarantine", "keep": _RHO_KEEP},
    "rank": {"name": "cosine+q", "beta_q": 0.5},
    "learn": [{"name": "rho-profile"}, {"name": "peer-reputation"}],
    "share": {"name": "rho-share"},
}

_TOKENWORTH: dict[str, Any] = {
    "description": "TokenWorth: worth learned online from execution feedback ranks and keeps",
    "estimators": {"worth": {"capacity": 64}},
    "admit": {"name": "worth-bank"},
    "form": {"name": "form", "kind": "insight"},
    "keep": {"name": "probe-worth"},
    "rank": {"name": "learned-worth", "k_max": 1},
    "learn": [{"name": "worth"}],
}

_EDM: dict[str, Any] = {
    "description": "EDM: persist only evaluation-certified trajectories (PEI >= 0.8 and "
    "TI >= 4.0); recall argmax cos x PEI with cos >= 0.87",
    "admit": {"name": "edm-gate", "min_pei": 0.8, "min_ti": 4.0},
    # e_tau embeds the plan: task + action (insight). Raw trajectories' schema and outcome lines
    # dilute the cosine: on a 300-task stream 0% of same-family (query, raw entry) pairs reach
    # 0.87, against 54% for insights (98% for the task text alone)
    "form": {"name": "form", "kind": "insight"},
    "keep": {"name": "newest"},
    "rank": {"name": "cosine*pei", "min_cosine": 0.87},
}

_JITMEM: dict[str, Any] = {
    "description": "JitMem: raw lossless bank gated by the executor as judge; BM25 over task "
    "descriptions (k=3); a curator writes a task-conditioned payload at read time, its choice "
    "of prompt/operator learned online from same-task reward (group-relative advantages, CPU)",
    "admit": {"name": "judge-gate"},
    # min_reward 0: the judge gate decides (and logs its rejections), never the checker
    "form": {"name": "form", "kind": "raw", "min_reward": 0.0},
    "keep": {"name": "newest"},
    "curate": {
        "name": "jitmem",
        "k": 3,
        "operators": ["llm-brief", "llm-adapt", "align", "closest"],
        "group_size": 4,
        "train_every": 2,
    },
    # JitMem keeps every raw trajectory (no keep rule): unbounded, like keep-all
    "bounded": False,
}

_MEMPILOT: dict[str, Any] = {
    "description": "MemPilot: per task up to T_max=3 steps of RETRIEVE (query-agnostic bank) or "
    "CURATE(strategy, model, k) over raw history; model pool with Eq. 14 cost and Eq. 17 "
    "latency proxy; CPU softmax policy trained with GDPO advantages + marginal utility, "
    "preference (1, 0.5, 0.5)",
    "form": {"name": "form", "kind": "raw"},
    "keep": {"name": "newest"},
    "curate": {"name": "mempilot", "lam_cost": 0.5, "lam_latency": 0.5},
    "bounded": False,
}


def _pipeline(description: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    return {"base": "mempilot", "description": description,
            "curate": {"name": "mempilot", "plan": plan}}  # fmt: skip


#: name -> spec (``base`` names another preset to inherit from).
PRESETS: dict[str, dict[str, Any]] = {
    "curator": _CURATOR,
    "curator/channel-trust": {
        "base": "curator",
        "description": "CURATOR as in the paper: Trust rho > theta with the origin-channel "
        "prior, self writes ungated, no feedback quarantine (issue 10 comparison)",
        "estimators": {"rho": {}},
        "admit": {"name": "rho-trust", "theta": 0.0},
        "keep": _RHO_KEEP,
        "learn": [{"name": "rho-profile"}],
    },
    "curator/no-provenance": {
        "base": "curator",
        "description": "CURATOR without the provenance-risk term of harm",
        "estimators": {"rho": {"use_provenance": False}},
    },
    "curator/no-per-byte": {
        "base": "curator",
        "description": "CURATOR ranking by net value, not per byte",
        "estimators": {"rho": {"per_byte": False}},
    },
    "curator/lambda=0": {
        "base": "curator",
        "description": "CURATOR without the harm term (lambda = 0)",
        "estimators": {"rho": {"lam": 0.0}},
    },
    "curator/no-abstraction": {
        "base": "curator",
        "description": "CURATOR without abstraction gain and distillation",
        "estimators": {"rho": {"use_abstraction": False}},
        "keep": {
            "name": "quarantine",
            "keep": {"name": "rho-density", "distill": False, "redundancy_delta": 0.85},
        },
    },
    "curator/no-rerank": {
        "base": "curator",
        "description": "CURATOR recalling by cosine only (no helpfulness rerank)",
        "rank": {"name": "cosine+q", "beta_q": 0.0},
    },
    # issue 11, cause 4 (churn): each change alone, then together
    "curator/lcb": {
        "base": "curator",
        "description": "CURATOR with q = Beta lower confidence bound of the injected-success rate",
        "estimators": {"rho": {"helpfulness": "beta-lcb"}},
        # the LCB is pessimistic for an entry never used, so the gate's value test (net value
        # > theta) would refuse every new entry: admission gates on content risk only
        "admit": {"name": "trust-gate", "theta": -2.0},
    },
    "curator/local-baseline": {
        "base": "curator",
        "description": "CURATOR with q against nearby tasks without the entry (a local "
        "counterfactual for Eq. 3), so a hard family's exemplars are not ranked last",
        "estimators": {"rho": {"helpfulness": "local-baseline"}},
    },
    "curator/align": {
        "base": "curator",
        "description": "CURATOR's budgeted memory, curated at read time by JitMem's extractive "
        "curator (best-mapping entry, the task's literals substituted, schema aligned; no LLM)",
        "curate": {"name": "jitmem", "k": 3, "operators": ["align"], "judge": False},
        # read through literal alignment, exemplars of one request pattern that differ only in
        # literals substitute for each other: Keep ranks by marginal value (issue 35)
        "keep": {"name": "quarantine", "keep": {**_RHO_KEEP, "coverage": True}},
    },
    "curator/margin": {
        "base": "curator",
        "description": "CURATOR whose Keep lets a new entry displace a proven one only by a "
        "margin (rho > 1.5 x the incumbent's)",
        "keep": _MARGIN_KEEP,
    },
    "curator/dedup": {
        "base": "curator",
        "description": "CURATOR rejecting self-derived entries that duplicate a resident entry "
        "of the same request (same SQL skeleton, cosine >= 0.6)",
        "admit": {"name": "same-request-dedup", "admit": {"name": "trust-gate", "theta": -0.5}},
    },
    "curator/anti-churn": {
        "base": "curator",
        "description": "CURATOR with the LCB helpfulness, the replacement margin and the "
        "duplicate test together",
        "estimators": {"rho": {"helpfulness": "beta-lcb"}},
        "admit": {"name": "same-request-dedup", "admit": {"name": "trust-gate", "theta": -2.0}},
        "keep": _MARGIN_KEEP,
    },
    # issue 11, cause 5: harm charged only beyond a typical entry's distance from the centroid
    "curator/eta-offset": {
        "base": "curator",
        "description": "CURATOR whose harm eta counts only the distance beyond a typical "
        "entry's (z > 1), so net value is not negative for every entry",
        "estimators": {"rho": {"eta_offset": 1.0}},
    },
    "keep-all": {
        "description": "No curation: every write kept, unbounded; recall by cosine",
        "bounded": False,
    },
    "no-memory": {
        "description": "No experience memory (lower bound)",
        "admit": {"name": "none"},
        "form": {"name": "form", "writes": False},
    },
    "lru": {
        "description": "Least recently used out first",
        "keep": {"name": "lru"},
    },
    "recency": {
        "description": "Oldest out first (FIFO)",
        "keep": {"name": "newest"},
    },
    "success-only": {
        "description": "Keep the entries with the most net successes",
        "keep": {"name": "successes"},
    },
    "full-oracle": {
        "description": "Keep everything; recall only correct, current exemplars (upper bound)",
        "rank": {"name": "oracle"},
        "bounded": False,
    },
    "tokenworth": _TOKENWORTH,
    "tokenworth/base-only": {
        "base": "tokenworth",
        "description": "TokenWorth with the linear base scorer only (no RFM residual)",
        "estimators": {"worth": {"capacity": 64, "residual": False}},
    },
    "tokenworth/no-agop": {
        "base": "tokenworth",
        "description": "TokenWorth with a fixed residual metric (no AGOP update)",
        "estimators": {"worth": {"capacity": 64, "agop": False}},
    },
    "tokenworth/bytes-capacity": {
        "base": "tokenworth",
        "description": "TokenWorth with B_max = max_bytes / mean entry bytes, so its "
        "coverage-quality admission and replacement run under the byte budget",
        "estimators": {"worth": {"capacity": 64, "capacity_from_bytes": True}},
    },
    "curator+worth": {
        "base": "curator",
        "description": "CURATOR's rho with TokenWorth's learned worth as helpfulness q",
        "estimators": {"rho": {"helpfulness": "worth"}, "worth": {}},
        "rank": {"name": "learned-worth", "k_max": None},
        "learn": [
            {"name": "rho-profile", "helpfulness": False},
            {"name": "worth"},
            {"name": "peer-reputation"},
        ],
    },
    "edm": _EDM,
    "jitmem": _JITMEM,
    "jitmem/untrained": {
        "base": "jitmem",
        "description": "JitMem-base: the LLM curator's briefing prompt, no learning",
        "curate": {"name": "jitmem", "k": 3, "operators": ["llm-brief"]},
    },
    "jitmem/extractive": {
        "base": "jitmem",
        "description": "JitMem with the extractive curator (no LLM): best-mapping trajectory, "
        "literals substituted, schema aligned",
        "curate": {"name": "jitmem", "k": 3, "operators": ["align"]},
    },
    "jitmem/learned-extractive": {
        "base": "jitmem",
        "description": "JitMem learning its choice among extractive operators (no LLM curator)",
        "curate": {
            "name": "jitmem",
            "k": 3,
            "operators": ["align", "closest", "multi", "none"],
            "group_size": 4,
            "train_every": 1,
        },
    },  # fmt: skip
    "jitmem/store-all": {
        "base": "jitmem",
        "description": "JitMem ablation: store every trajectory, labelled by the judge",
        "admit": {"name": "all"},
    },
    "jitmem/no-curator": {
        "base": "jitmem",
        "description": "JitMem ablation: inject the k raw trajectories whole (no curation)",
        "curate": {"name": "jitmem", "k": 3, "operators": ["raw"]},
    },
    "jitmem/distilled-bank": {
        "base": "jitmem",
        "description": "JitMem ablation: the bank stores distilled insights, not raw trajectories",
        "form": {"name": "form", "kind": "insight", "min_reward": 0.0},
    },
    "mempilot": _MEMPILOT,
    "mempilot/perf": {
        "base": "mempilot",
        "description": "MemPilot, quality only: preference (1, 0, 0)",
        "curate": {"name": "mempilot", "lam_cost": 0.0, "lam_latency": 0.0},
    },
    "mempilot/cost": {
        "base": "mempilot",
        "description": "MemPilot, cost-averse: preference (1, 1, 0)",
        "curate": {"name": "mempilot", "lam_cost": 1.0, "lam_latency": 0.0},
    },
    "mempilot/latency": {
        "base": "mempilot",
        "description": "MemPilot, latency-averse: preference (1, 0, 1)",
        "curate": {"name": "mempilot", "lam_cost": 0.0, "lam_latency": 1.0},
    },
    "mempilot/no-marginal": {
        "base": "mempilot",
        "description": "MemPilot ablation: no prefix-based marginal utility (eta = 0)",
        "curate": {"name": "mempilot", "lam_cost": 0.5, "lam_latency": 0.5, "eta": 0.0},
    },
    "mempilot/curator-bank": {
        "base": "curator",
        "description": "MemPilot over CURATOR's budgeted bank (RETRIEVE uses CURATOR's recall)",
        "curate": {"name": "mempilot", "lam_cost": 0.5, "lam_latency": 0.5},
    },
    "pipeline/retrieve-k1": _pipeline(
        "Fixed pipeline: always RETRIEVE k=1 from the bank", [{"z": "retrieve", "k": 1}]
    ),
    "pipeline/curate-local": _pipeline(
        "Fixed pipeline: always CURATE (adapt, k=3) with the local model",
        [{"z": "curate", "k": 3, "strategy": "adapt", "model": "local"}],
    ),
    "pipeline/escalate": _pipeline(
        "Fixed pipeline: always CURATE (k=3) with the priced expert (offline stand-in)",
        [{"z": "curate", "k": 3, "strategy": "adapt", "model": "expert-sim"}],
    ),
    "edm/no-gate": {
        "base": "edm",
        "description": "EDM's cos x PEI recall without its evaluation gate (stores everything)",
        "admit": {"name": "all"},
    },
}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if k == "estimators" and isinstance(v, Mapping):
            est = out.setdefault("estimators", {})
            for n, p in v.items():
                est[n] = {**est.get(n, {}), **dict(p or {})}
        else:
            out[k] = copy.deepcopy(v)
    return out


def resolve(name: str, table: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The full spec of preset ``name``, with ``base`` inheritance resolved.

    Raises
    ------
    KeyError
        ``name`` (or a base it names) is not in the table.
    InvalidInput
        ``base`` inheritance forms a cycle.
    """
    table = PRESETS if table is None else table
    chain: list[str] = []
    spec: Mapping[str, Any] = table[name]
    layers = [spec]
    while "base" in spec:
        b = str(spec["base"])
        if b in chain or b == name:
            raise InvalidInput(f"preset {name!r}: 'base' forms a cycle through {b!r}")
        chain.append(b)
        spec = table[b] if b in table else PRESETS[b]
        layers.append(spec)
    out: dict[str, Any] = {}
    for layer in reversed(layers):
        out = _merge(out, {k: v for k, v in layer.items() if k != "base"})
    return out


def load_policy_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read presets from a TOML or JSON file: a table of name -> spec.

    A spec may name a ``base`` (a preset of the file or a built-in one) and override parts.

    Returns
    -------
    dict of str to dict
        Name -> resolved spec (``base`` applied).

    Raises
    ------
    InvalidInput
        The file is missing, unreadable, not TOML/JSON, or not a table of tables; a ``base``
        that names no preset.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise InvalidInput(f"cannot read policy file {str(p)!r}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise InvalidInput(f"{str(p)!r} is not a valid policy file: {e}") from None
    if (
        not isinstance(data, dict)
        or not data
        or not all(isinstance(v, dict) for v in data.values())
    ):
        raise InvalidInput(
            f"{str(p)!r} must hold one table per policy (name -> components), e.g. [my-policy]"
        )
    out = {}
    for name in data:
        try:
            out[name] = resolve(name, data)
        except KeyError as e:
            raise InvalidInput(f"policy {name!r} in {str(p)!r}: unknown base {e}") from None
    return out


__all__ = ["PRESETS", "load_policy_file", "resolve"]
