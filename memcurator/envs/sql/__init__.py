"""The SQL testbed: recurring LifelongAgentBench task families (DESIGN.md).

Load the dataset as specs, check answers by real execution, draw variants, drift schemas and
craft poisoned exemplars:

>>> from memcurator.envs.sql import SQLTaskSpec, check, schema_text
"""

from memcurator.domains.sql.db import ExecResult, execute, make_db, read_table, split_statements
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.checker import (
    ATOL,
    STORED_ATOL,
    CheckResult,
    Expected,
    check,
    reference_result,
    reproduces_stored,
    rows_match,
    values_equal,
)
from memcurator.envs.sql.data import (
    DATA_ENV,
    DataNotFound,
    SpecSet,
    family_id,
    find_data,
    load_specs,
)
from memcurator.envs.sql.drift import Rename, migrate, renamable_columns, rename_map
from memcurator.envs.sql.hashing import row_hash, table_md5
from memcurator.envs.sql.poison import (
    PAYLOADS,
    exemplar_text,
    hijack_executed,
    make_poison,
    payload_executed,
    poison_sql,
)
from memcurator.envs.sql.prompt import schema_text
from memcurator.envs.sql.translate import to_sqlite
from memcurator.envs.sql.variants import (
    family_rng,
    is_degenerate,
    make_variant,
    shared_literals,
    to_task,
    variant_families,
)

__all__ = [
    "ATOL",
    "DATA_ENV",
    "PAYLOADS",
    "STORED_ATOL",
    "CheckResult",
    "DataNotFound",
    "ExecResult",
    "Expected",
    "Rename",
    "SQLTaskSpec",
    "SpecSet",
    "check",
    "execute",
    "exemplar_text",
    "family_id",
    "family_rng",
    "find_data",
    "is_degenerate",
    "load_specs",
    "make_db",
    "make_poison",
    "make_variant",
    "migrate",
    "hijack_executed",
    "payload_executed",
    "poison_sql",
    "read_table",
    "reference_result",
    "reproduces_stored",
    "renamable_columns",
    "rename_map",
    "row_hash",
    "rows_match",
    "schema_text",
    "shared_literals",
    "split_statements",
    "table_md5",
    "to_sqlite",
    "to_task",
    "values_equal",
    "variant_families",
]
