"""The worked examples of docs/architecture.md, one test per extension point (issue 31, item 6).

Each test defines a tiny new plug-in, registers it the documented way and shows that the library
uses it: a keep component (``COMPONENTS["keep"]``), a domain check (``DOMAIN_CHECKS``), a store
backend (the :class:`~memcurator.store.base.Store` protocol and the contract suite) and an LLM
executor (``EXECUTORS``). The doc quotes the code between the ``# --- example`` markers; keep the
two in sync. Registrations are undone after each test so no other test sees them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import test_store_contract as contract  # the contract suite, called with one more backend

from memcurator import Memory
from memcurator.curate.llm import judge
from memcurator.llm import EXECUTORS, Executor, MeteredExecutor, create_executor
from memcurator.llm.base import Completion, check_request
from memcurator.policy import PRESETS, register
from memcurator.policy.components import COMPONENTS
from memcurator.policy.keep import NewestFirst
from memcurator.store.base import Store
from memcurator.store.sqlite import SQLiteStore
from memcurator.trust.domains import DOMAIN_CHECKS, RiskReport, domain_risks
from memcurator.types import Entry


# ------------------------------------------------------------------------ policy component
# --- example: keep component
class PinnedFirst(NewestFirst):
    """Keep entries whose meta says ``pinned`` over all others; among equals, oldest out first."""

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        age = super().priority(entries, E, step)  # created_step: newer stays longer
        pinned = np.array([bool(m.meta.get("pinned")) for m in entries], dtype=np.float64)
        return pinned * 1e12 + age

    def evict_reason(self) -> str:
        return "oldest unpinned entry when the byte budget was full"


# --- end example


def test_a_keep_component_registered_by_name_decides_what_a_memory_evicts() -> None:
    # --- example: keep component, use
    COMPONENTS["keep"].register("pinned-first", PinnedFirst)
    register("pinned", {"description": "pinned entries stay", "keep": {"name": "pinned-first"}})
    # --- end example
    try:
        _pinned_entries_stay()
    finally:
        COMPONENTS["keep"]._entries.pop("pinned-first")
        del PRESETS["pinned"]
    assert "pinned-first" not in COMPONENTS["keep"] and "pinned" not in PRESETS


def _pinned_entries_stay() -> None:
    # --- example: keep component, use
    mem = Memory(policy="pinned", max_bytes=2_000)
    rule = mem.write(
        "Standing rule: never run DELETE without a WHERE clause.", meta={"pinned": True}
    )
    notes = [mem.write(f"Deploy note {i}: " + "staging uses tool beta. " * 8) for i in range(12)]
    resident = {e.id for e in mem.entries()}
    assert rule.id in resident  # the oldest entry, kept because it is pinned
    assert notes[0].id not in resident  # the oldest unpinned entry went first
    assert mem.used_bytes <= 2_000
    evicted = mem.decisions(action="evict")
    assert evicted and all(
        d.reason == "oldest unpinned entry when the byte budget was full" for d in evicted
    )
    # --- end example
    # the same writes under the built-in recency rule evict the rule first: the component
    # above, not the budget alone, is what kept it
    plain = Memory(policy="recency", max_bytes=2_000)
    first = plain.write(
        "Standing rule: never run DELETE without a WHERE clause.", meta={"pinned": True}
    )
    for i in range(12):
        plain.write(f"Deploy note {i}: " + "staging uses tool beta. " * 8)
    assert first.id not in {e.id for e in plain.entries()}


# ---------------------------------------------------------------------------- domain check
# --- example: domain check
class DeployCheck:
    """A ``deployctl`` action that targets an environment its task does not name."""

    name = "deploy"

    def applies(self, entry: Any) -> bool:  # cheap: the gate asks it about every action
        return entry.action.lstrip().startswith("deployctl ")

    def risk(self, entry: Any, *, spec: Any = None) -> RiskReport:
        envs = re.findall(r"--env\s+(\w+)", entry.action)
        other = [e for e in envs if e not in entry.task.lower()]
        if not other:
            return RiskReport(0.0)
        return RiskReport(0.9, (f"deploys to {other[0]}, which the task does not name (0.90)",))


# --- end example

BAD = "Task: roll out the new config to staging\nAction: deployctl rollout --env prod"
GOOD = "Task: roll out the new config to staging\nAction: deployctl rollout --env staging"


def test_a_domain_check_registered_in_the_registry_makes_the_gate_refuse_its_action() -> None:
    before = Memory(policy="curator", max_bytes=50_000)
    assert "deploy" not in domain_risks(BAD) and before.write(BAD).admitted  # nothing judged it
    try:
        # --- example: domain check, use
        DOMAIN_CHECKS.register("deploy", DeployCheck)
        assert domain_risks(BAD)["deploy"].risk == 0.9
        mem = Memory(policy="curator", max_bytes=50_000)
        refused = mem.write(BAD)  # the agent's own record: judged like any other origin
        assert not refused.admitted
        assert "deploys to prod, which the task does not name" in refused.reason
        assert mem.write(GOOD).admitted
        # --- end example
        assert [d.entry_id for d in mem.decisions(action="reject")] == [refused.id]
    finally:
        DOMAIN_CHECKS._entries.pop("deploy")
    assert "deploy" not in DOMAIN_CHECKS


# ---------------------------------------------------------------------------- store backend
# --- example: store backend
class AuditedStore(SQLiteStore):
    """SQLite with an audit trail: every insert and delete is also appended to ``audit``."""

    audit: list[tuple[str, str, str]] = []  # (operation, namespace, entry id), every handle

    def insert(self, entry: Entry) -> None:
        super().insert(entry)
        AuditedStore.audit.append(("insert", entry.namespace, entry.id))

    def delete(self, namespace: str, entry_id: str) -> int:
        freed = super().delete(namespace, entry_id)
        AuditedStore.audit.append(("delete", namespace, entry_id))
        return freed


# --- end example


def test_a_store_backend_passes_the_contract_suite_and_serves_a_memory(tmp_path: Path) -> None:
    AuditedStore.audit = []

    # --- example: store backend, contract
    def backend(folder: Path) -> contract.Backend:  # contract: tests/test_store_contract.py
        path = folder / "audited.sqlite"
        return contract.Backend(
            "audited",
            lambda: AuditedStore(path),
            lambda: b"".join(p.read_bytes() for p in sorted(folder.glob("audited.sqlite*"))),
        )

    for check in (
        contract.test_implements_the_protocol,
        contract.test_budget_held_across_two_handles,
        contract.test_hard_delete_leaves_no_read_path_and_no_bytes,
        contract.test_namespace_isolation,
        contract.test_a_transaction_that_raises_leaves_nothing,
        contract.test_change_token_sees_another_handle,
    ):
        folder = tmp_path / check.__name__
        folder.mkdir()
        check(backend(folder))
    # --- end example
    assert isinstance(AuditedStore(tmp_path / "x.sqlite"), Store)
    AuditedStore.audit = []
    mem = Memory(store=AuditedStore(tmp_path / "m.sqlite"), namespace="a", policy="lru")
    kept = mem.write("Task: count rows\nAction: SELECT COUNT(*) FROM t;").id
    mem.forget(kept)
    assert AuditedStore.audit == [("insert", "a", kept), ("delete", "a", kept)]


# -------------------------------------------------------------------------------- executor
# --- example: executor
class CannedExecutor:
    """Answers every prompt with one fixed text; counts words as tokens."""

    name = "canned"
    temperature = 0.0

    def __init__(self, answer: str = "yes", model: str = "canned-1") -> None:
        self.answer, self.model_id = answer, model

    def complete(
        self, prompt: str, *, max_tokens: int = 128, stop: list[str] | None = None
    ) -> Completion:
        check_request(prompt, max_tokens, stop)  # the protocol's argument checks
        words = self.answer.split()[:max_tokens]
        return Completion(" ".join(words), len(prompt.split()), len(words), 0.0, 0.0, self.model_id)


# --- end example


def test_an_executor_registered_by_name_is_built_metered_and_used_by_a_curator() -> None:
    try:
        # --- example: executor, use
        EXECUTORS.register("canned", CannedExecutor)
        ex = MeteredExecutor(create_executor("canned", answer="no"))
        assert isinstance(ex, Executor)
        verdict, call = judge(ex, "count rows of t", "Table t(a INT)", "SELECT 1;", "[(1,)]")
        assert verdict is False and call is not None and call.model == "canned-1"
        assert ex.usage.calls == 1 and ex.usage.tokens_out == 1
        # --- end example
        assert judge(create_executor("canned"), "t", "o", "SELECT 1;", "[]")[0] is True
    finally:
        EXECUTORS._entries.pop("canned")
    assert "canned" not in EXECUTORS
