"""The SQL domain check as the SQL environment uses it: :mod:`memcurator.domains.sql.check` (a
core plug-in that imports no environment) and its dry run, :mod:`memcurator.domains.sql.risk`."""

from memcurator.domains.sql.check import SQLCheck, entry_sql_risk
from memcurator.domains.sql.risk import Effects, dry_run, parse_entry, sql_risk

__all__ = ["Effects", "SQLCheck", "dry_run", "entry_sql_risk", "parse_entry", "sql_risk"]
