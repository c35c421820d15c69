"""Adapters that put a :class:`~memcurator.Memory` behind another framework's memory interface.

Each adapter lives in its own module and imports its framework there, so ``import memcurator``
(and ``import memcurator.integrations``) needs none of them:
:mod:`memcurator.integrations.langgraph` needs the ``langgraph`` extra.
"""
