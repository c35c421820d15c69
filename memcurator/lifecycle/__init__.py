"""The memory lifecycle, one module per stage, behind the :class:`~memcurator.Memory` facade.

========================  ====================================================================
:mod:`.resident`          the resident set: entries, embedding matrix, byte account, caches
:mod:`.write`             validation, reinforcement, admission through the policy's gate
:mod:`.recall`            candidate pool (BM25 + dense, fused), the policy's ranking
:mod:`.keep`              the Keep pass: victims, budget restored by priority, distillation
:mod:`.exchange`          Share under an uplink budget; receive with Trust
========================  ====================================================================
"""
