"""The memory lifecycle, one module per stage, behind the :class:`~memcurator.Memory` facade.

Every stage takes a :class:`~memcurator.lifecycle.context.Context` (or, for forget, the smaller
:class:`~memcurator.lifecycle.context.Scope`) and returns a result; no stage imports the facade.

========================  ====================================================================
:mod:`.context`           store, resident set, policy, decision log, step clock, sizing, energy
:mod:`.resident`          the resident set: entries, embedding matrix, byte account, caches
:mod:`.checks`            validation of texts, metadata, statistics; the de-duplication key
:mod:`.write`             reinforcement, admission through the policy's gate
:mod:`.recall`            candidate pool (BM25 + dense, fused), the policy's ranking
:mod:`.feedback`          counts, learning, quarantine evictions, reputation
:mod:`.update`            replace an entry's text atomically
:mod:`.forget`            the one hard-delete path (Memory, peers' notices, the CLI)
:mod:`.keep`              the Keep pass: victims, budget restored by priority, distillation
:mod:`.record`            close a task: feedback, the policy's form, the step clock, energy
:mod:`.exchange`          Share under an uplink budget; receive with Trust
========================  ====================================================================
"""
