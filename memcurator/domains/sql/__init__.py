"""The SQL domain check: :mod:`~memcurator.domains.sql.check` (``SQLCheck``, no sqlglot at import)
and the dry run behind it, :mod:`~memcurator.domains.sql.risk`, with the one-table task
description it runs on (:mod:`~memcurator.domains.sql.spec`) and SQLite execution with a deadline
(:mod:`~memcurator.domains.sql.db`). The SQL environment (:mod:`memcurator.envs.sql`) builds on
them; nothing here imports it.
"""
