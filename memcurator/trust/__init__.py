"""Trust building blocks: authenticated provenance, content risk, peer reputation.

Each module is standalone and tested on its own; :mod:`memcurator.trust.gate` composes them into
one admission decision for the memory's write path.
"""
