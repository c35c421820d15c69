"""The words of memcurator's tables and options, in plain language: one source for all of them.

``docs/glossary.md``, ``memcurator explain`` and the HTML report page are all rendered from
:data:`GLOSSARY`; a test checks that ``docs/glossary.md`` equals :func:`glossary_markdown`.
To add a term, add one :class:`Term` here and regenerate the page with
``python -m memcurator.glossary > docs/glossary.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from memcurator.errors import UnknownName


@dataclass(frozen=True)
class Term:
    """One glossary entry.

    Parameters
    ----------
    name : str
        The term as tables and options spell it.
    text : str
        What it means, in a few plain sentences.
    aliases : tuple of str
        Other spellings ``memcurator explain`` accepts (case-insensitive).
    """

    name: str
    text: str
    aliases: tuple[str, ...] = ()


GLOSSARY: tuple[Term, ...] = (
    Term(
        "task accuracy",
        "Share of the stream's tasks the local model solved itself, checked by executing its SQL "
        "on SQLite and comparing with the reference result. Escalated tasks count as failures "
        "here. Rests on every task of the stream (n = tasks × seeds).",
        ("accuracy", "task acc", "acc", "local_ok", "task acc [95% CI]"),
    ),
    Term(
        "victim accuracy",
        "Task accuracy on the victim tasks only: tasks that come after a schema drift, from a "
        "family whose table or column was renamed. Old exemplars of such a family are stale and "
        "mislead the model, so this measures selective forgetting. Rests on the victim tasks "
        "only, often a few dozen; read its n.",
        ("victim", "victim acc", "victim_accuracy", "victim acc [95% CI]"),
    ),
    Term(
        "same-family injection",
        "Share of tasks whose prompt received an exemplar from the task's own family (the same "
        "kind of request with other values). The bundled small model mostly succeeds only with "
        "such an exemplar, so this shows whether recall found the right memory.",
        ("same-fam inj", "same_family_rate", "same-family", "injected_same_family"),
    ),
    Term(
        "injection ASR",
        "Attack success rate: share of the attacker's query tasks (tasks of the families the "
        "poisoned entries target, after they were written) whose executed SQL carried out the "
        "poison payload (e.g. dropped or emptied the table), checked on the database. Lower is "
        "better. Rests on the attacker tasks only.",
        ("ASR", "inj. ASR", "inj asr", "attack success rate", "payload_executed"),
    ),
    Term(
        "energy proxy",
        "A machine-independent stand-in for energy, in MB: bytes embedded (texts written and "
        "queries) plus resident bytes scanned by each recall and governance pass, summed over "
        "the stream. It grows with how much memory is kept and searched.",
        ("energy", "energy MB", "energy_mb"),
    ),
    Term(
        "peak KB",
        "Largest resident memory of the run in kilobytes (1024 bytes): the sum of the stored "
        "bytes b of the entries held at once (text, metadata and embedding). Bounded policies "
        "stay under the budget B.",
        ("peak", "peak_kb", "resident bytes", "peak KB/agent"),
    ),
    Term(
        "bytes per entry",
        "Bytes per resident entry at the end of the run (B/entry), and the share of the resident "
        "bytes that are embedding vectors (vec share). An entry is stored as its text, its "
        "metadata as JSON and its embedding in the namespace's vector_dtype (float32 by default, "
        "4 bytes a dimension: 2,048 bytes for the 512-d hashing embedder; float16 1,024; int8 "
        "516 with its scale; binary 64, sign bits whose exact vectors are derived from the "
        "text on load, hashing embedder only); the budget B pays for all three as stored, so a "
        "high vec share "
        "means the budget buys vectors rather than experience. summary.json has the three parts "
        "per run (entry_text_b, entry_meta_b, entry_vec_b).",
        ("B/entry", "vec share", "entry_total_b", "vec_share"),
    ),
    Term(
        "family coverage",
        "Share of the stream's recurring task families (drawn at least twice) that have at least "
        "one resident exemplar (poison excluded). fam cover is the resident set at the end of "
        "the run; fam cover avg averages it over the stream, counting after each task only the "
        "recurring families drawn so far. With fewer slots than recurring families, a memory that "
        "holds one exemplar of more families serves more tasks (TokenWorth's coverage, CURATOR's "
        "redundancy). The bench reads the family from each entry's metadata; the library's Keep "
        "never sees it.",
        ("fam cover", "fam cover avg", "family_coverage", "family_coverage_mean", "coverage"),
    ),
    Term(
        "budget front",
        "Accuracy against peak KB for each bounded policy run at several budgets B "
        "(--max-bytes 25k,50k,100k): one line per policy, keep-all and full-oracle as unbounded "
        "references. The knee is the smallest budget at which a policy reaches 97% of its own "
        "best accuracy over the swept budgets. Written as budget_fronts.md / budget_fronts.png.",
        ("front", "fronts", "knee", "÷ oracle", "÷ keep-all", "÷ reference"),
    ),
    Term(
        "B",
        "The resident byte budget (--max-bytes, max_bytes): the most bytes a bounded policy may "
        "hold at once. The store enforces it; the policy only chooses what to evict. Unbounded "
        "policies (keep-all, full-oracle) ignore it. One entry of the SQL benchmark takes about "
        "2.5 KB (its 512-d embedding alone is 2 KB), so a B below that holds nothing.",
        ("budget", "max_bytes", "max-bytes"),
    ),
    Term(
        "ρ",
        "CURATOR's one score (rho): net value per byte, ρ(m) = (V̂(m) − λ·Ĥ(m)) / b(m) "
        "(CURATOR, Eq. 1). V̂ = propensity (how likely the entry is to be recalled for the "
        "recent queries) × helpfulness q (observed marginal utility when injected) × abstraction "
        "gain a (raw bytes / stored bytes). Ĥ = negative-transfer risk η + provenance risk π. "
        "Keep holds the highest-ρ entries that fit B; Trust admits an outside write only if "
        "ρ > θ.",
        ("rho", "net value density"),
    ),
    Term(
        "θ",
        "The Trust threshold θ. In curator's trust gate (default -0.5) a write is admitted only "
        "if its net value V - λ·r (r: content risk) is above θ and r is below θ_r of its "
        "verified origin. In curator/channel-trust (the paper's gate, default 0) a write from a "
        "peer or an external source is admitted only if its ρ, recomputed locally, is above θ.",
        ("theta", "trust threshold"),
    ),
    Term(
        "trust gate",
        "What the curator policy checks when an entry is offered (memcurator/policy/trust.py, "
        "TrustGate; docs/trust.md). It gates every write, whatever its origin, self included. "
        "The origin is first verified: with a key ring, a self or peer claim without a valid "
        "signature is handled as external (logged as 'downgrade'). The gate then computes the "
        "content risk r: it executes the entry's SQL on an in-memory copy of the schema (a "
        "DROP TABLE, a DELETE without WHERE or values the task did not name are risky), reads "
        "its text (instruction-likeness, a trigger clause, a free passage arriving from "
        "outside) and looks for contradictions with the 10 nearest resident entries. It admits "
        "the entry when r is below θ_r of the origin (self 0.9, peer and external 0.5) and the "
        "net value V - λ·r is above θ (-0.5). The decision log gives every finding. The paper's "
        "gate, ρ > θ with the provenance prior π = σ(wᵀψ) of the claimed origin on peer and "
        "external writes only, is the curator/channel-trust preset.",
        ("trust", "Trust", "admission", "provenance", "π", "pi"),
    ),
    Term(
        "contained trial",
        "With bench --trial, after a task's live attempt, the entry on trust probation about "
        "the same request (cosine >= 0.8) is shown, as outside data, in one shadow attempt "
        "whose action runs only in the task's checker (SQL: a fresh copy of the task's "
        "database; OS: a fresh sandbox). It passes if the check passes and the domain harm "
        "check finds nothing: the entry is then released (injectable); otherwise the failure "
        "counts against it. The shadow is never the live answer and is never written. trials, "
        "trials_released: per task; poison trialled: a poison entry shown in a shadow prompt "
        "(contained), unlike poison injected live (docs/trust.md).",
        ("trial", "trials", "trials_released", "trial_poison", "poison trialled", "--trial"),
    ),
    Term(
        "n_p",
        "Number of poisoned entries the attacker writes (--poison). 0 runs without an attack.",
        ("poison", "n_p", "np"),
    ),
    Term(
        "escalation",
        "When the local model fails a task, the task goes to an expert (a stronger, priced "
        "model; in the offline benchmark it replays the dataset's reference SQL). 'escal.' "
        "counts escalated tasks per run; 'cost $' is their price (--expert-cost per call).",
        ("escal.", "escalations", "escalated", "cost_usd", "expert", "cost", "cost $"),
    ),
    Term(
        "tokens",
        "Prompt (input) and completion (output) tokens of the local model per task, mean over "
        "the run's tasks ('tok in/task', 'tok out/task').",
        ("tok in/task", "tok out/task", "tokens_in", "tokens_out"),
    ),
    Term(
        "mem s / LLM s",
        "Seconds spent inside memcurator (recall, write, governance) against seconds spent in "
        "the LLM, summed over a run: the governance overhead.",
        ("mem s", "LLM s", "mem_s", "llm_s", "overhead"),
    ),
    Term(
        "family",
        "One LifelongAgentBench task. Its variants re-instantiate it with other literal values, "
        "so a deployed agent sees the same kind of request again and again. --families is how "
        "many families take part; the stream draws them with Zipf popularity (--zipf).",
        ("families", "variant", "variants"),
    ),
    Term(
        "drift",
        "At the stream's phase boundary a share of families (--drift) migrate their schema "
        "(a table or column renamed); their later tasks are the victim tasks.",
        ("schema drift",),
    ),
    Term(
        "seed",
        "One random stream (families drawn, variants, drift, attack); every policy of a seed "
        "sees the same stream. 'mean ± sd over seeds' needs two or more seeds; with one seed "
        "there is no sd.",
        ("seeds", "sd", "mean ± sd"),
    ),
    Term(
        "n",
        "How many tasks a measure rests on, over all seeds of a policy: all tasks for accuracy, "
        "victim tasks for victim accuracy, attacker tasks for injection ASR. A measure resting "
        "on fewer than 20 tasks is flagged: its value can swing by 0.1 or more from one seed "
        "to the next.",
        ("sample size", "n", "n_victim", "n_attacker"),
    ),
    Term(
        "MP",
        "Memory precision (EDM): the fraction of retrieved entries whose PEI is at least 0.8, "
        "i.e. how much of what recall brings back is an entry of proven quality.",
        ("mp", "edm_mp", "memory precision"),
    ),
    Term(
        "MRS",
        "Memory retention stability (EDM): the standard deviation, over 5 consecutive cycles of "
        "the stream, of the mean PEI of the agent's own episodes (0 for a task it did not solve "
        "locally); lower is steadier. A learning curve that rises raises it as much as a "
        "regression does.",
        ("mrs", "retention stability"),
    ),
    Term(
        "CER",
        "Cognitive efficiency ratio (EDM): steps per task divided by a baseline's on the same "
        "streams (no-memory when it ran, else keep-all); a step is one statement the local "
        "agent executed, plus one for an escalation. Below 1 means memory saves steps.",
        ("cer", "cognitive efficiency", "cognitive efficiency ratio"),
    ),
    Term(
        "PEI",
        "Planning efficiency index (EDM): L_min / L_actual × QF of a trajectory; here L_actual "
        "is the statements the persisted trajectory executed (the expert's one after an "
        "escalation), L_min = 1, QF = 1 if the execution check passed. EDM admits an entry "
        "when PEI ≥ 0.8 and TI ≥ 4.0 (TI: a 0-5 traceability rubric, see "
        "memcurator.envs.sql.edm).",
        ("pei",),
    ),
    Term(
        "injected tokens",
        "Prompt tokens per task taken by the injected memory: the memory block's share of the "
        "first prompt's measured tokens (characters of the block over characters of the prompt). "
        "For read-time curators (JitMem, MemPilot) the block is the curated payload, which is "
        "never stored.",
        ("inj tok/task", "inject_tokens", "payload tokens"),
    ),
    Term(
        "curation calls",
        "Model calls a read-time curator made for a task (JitMem's LLM curator, MemPilot's "
        "delegated CURATE steps), and their tokens in + out. probes/task counts the extra "
        "executions a learning curator ran to score candidate payloads (JitMem's group-relative "
        "reward, MemPilot's prefix probes); like MemPilot App. A.1, probes are excluded from "
        "cost and latency.",
        (
            "cur calls/task",
            "cur tok/task",
            "curator_calls",
            "curator_tokens",
            "probes/task",
            "probe_calls",
        ),
    ),
    Term(
        "cost per task",
        "USD per task: the expert's price when the task escalated plus every curation call "
        "priced by MemPilot's Eq. 14, 1e-6 × (p_in n_in + p_out n_out), with the pool's prices "
        "per 1M tokens (local models cost 0).",
        ("$/task", "cost_per_task"),
    ),
    Term(
        "latency proxy",
        "MemPilot's affine latency proxy (Eq. 15-19): each call costs b + a_in n_in + a_out "
        "n_out seconds with the model's profile from the pool; calls in one stage count their "
        "maximum, stages add up. lat s/task is the measured wall-clock of the same calls (a "
        "completion-cache hit replays the measured value).",
        ("proxy s/task", "lat s/task", "latency_proxy_s", "latency_task_s", "latency"),
    ),
    Term(
        "preference",
        "MemPilot's λ = (λ_Q, λ_C, λ_L), with λ_Q = 1: how much its learned orchestrator weighs "
        "cost and latency against quality (Eq. 10). `memcurator bench --preferences` sweeps it "
        "and draws the quality-cost and quality-latency fronts next to fixed pipelines.",
        ("lambda", "preferences", "λ"),
    ),
    Term(
        "policy",
        "A memory policy preset: one named bundle of components, one per decision (admit, "
        "form, keep, rank, learn, share). `memcurator policies` lists them with their "
        "components; every table has one row per policy.",
        ("policies", "preset", "presets", "components", "what it does"),
    ),
    Term(
        "paired comparison",
        "`memcurator compare`: each policy against a baseline on the same tasks (same seed and "
        "step), on a 0/1 outcome column of records.csv (local_ok, escalated, payload_executed, "
        "injected_same_family). Δ is the mean difference policy − baseline; 95% CI its "
        "bootstrap interval (tasks resampled within each seed); only policy / only base count "
        "the tasks only one of the two got right; p is the exact McNemar test on those counts.",
        ("compare", "Δ", "diff", "95% CI", "only policy", "only base", "p", "McNemar p"),
    ),
    Term(
        "evictions",
        "Entries the keep policy evicted to stay under the budget B, per seed (the decision "
        "log's evict rows). A front shows how often a policy has to evict at each budget.",
        ("evict", "evict/seed", "eviction"),
    ),
    Term(
        "peer group",
        "`memcurator bench --peers M`: M agents with their own memories share entries every R "
        "tasks through an uplink of L bytes per agent and round (the uplink front varies L; "
        "broadcasting policies send everything, once). acc (outside) is the accuracy on tasks "
        "from outside traffic, acc (isolated) the same agent's without sharing, acc (pooled) the "
        "same agents all reading and writing one shared namespace (the upper bound of what "
        "sharing can give); genuine adm and poison adm the shares of genuine and poisoned "
        "shared entries admitted on a channel (peer, external, self); ASR without attack is the "
        "same measure in a run without poison.",
        (
            "peers",
            "L",
            "uplink",
            "uplink B/round",
            "acc (outside)",
            "acc (isolated)",
            "acc (pooled)",
            "pooled",
            "channel",
            "genuine adm",
            "poison adm",
            "ASR without attack",
            "broadcast",
        ),
    ),
    Term(
        "seed",
        "The random seed of one stream: the same seed gives every policy the same tasks in the "
        "same order, so their outcomes pair task by task.",
    ),
)


def _key(s: str) -> str:
    return " ".join(s.casefold().replace("_", " ").replace("-", " ").split())


def lookup(term: str) -> Term:
    """The glossary entry for ``term`` or one of its aliases (case-insensitive).

    Raises
    ------
    UnknownName
        ``term`` is in no entry; the message lists the known terms.

    Examples
    --------
    >>> lookup("rho").name
    'ρ'
    >>> lookup("Victim ACC").name
    'victim accuracy'
    """
    want = _key(term)
    for t in GLOSSARY:
        if want in {_key(t.name), *(_key(a) for a in t.aliases)}:
            return t
    raise UnknownName(f"no glossary entry for {term!r}; known: {sorted(t.name for t in GLOSSARY)}")


def glossary_markdown() -> str:
    """The glossary as a Markdown page (``docs/glossary.md``)."""
    lines = [
        "# Glossary",
        "",
        "The words of memcurator's tables, options and papers in plain language. Generated from",
        "`memcurator/glossary.py` (`python -m memcurator.glossary > docs/glossary.md`); on the",
        "command line: `memcurator explain TERM`.",
        "",
    ]
    for t in GLOSSARY:
        also = f" (also: {', '.join(t.aliases)})" if t.aliases else ""
        lines += [f"- **{t.name}**{also}: {t.text}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(glossary_markdown(), end="")
