"""A yes/no flag literal stands for a predicate the task says in words (issue 33, own advice
admitted as ``self``): "entries that require corrective actions" is ``needed = 'Yes'``. Found on
the bench's SQL set (one own record refused); members written for this file. A flag used where
the task names another value is still an answer hijack.
"""

from __future__ import annotations

import pytest

from memcurator.trust.gate import assess

FLAG_RECORDS = [
    "Task: Which inspections require corrective actions? Return the inspection id.\n"
    "Action: SELECT inspection_id FROM inspections WHERE corrective_actions_needed = 'Yes';",
    "Task: List the customers who opted out of the newsletter.\n"
    "Action: SELECT name FROM customers WHERE newsletter_opt_in = 'No';",
    "Task: How many devices have their alarm switched on?\n"
    "Action: SELECT COUNT(*) FROM devices WHERE alarm = 'on';",
    "Task: Show the orders that were not shipped yet and cost more than 100.\n"
    "Action: SELECT id FROM orders WHERE shipped = 'N' AND total > 100;",
    "Task: Count the members with a paid-up membership.\n"
    "Action: SELECT COUNT(*) FROM members WHERE paid = 'yes';",
]

HIJACKS = [
    # the task names the value; the SQL swaps it for a flag
    "Task: How many inspections of the 'Plumbing' area are there?\n"
    "Action: SELECT COUNT(*) FROM inspections WHERE corrective_actions_needed = 'Yes';",
    "Task: List the customers in 'Berlin'.\n"
    "Action: SELECT name FROM customers WHERE newsletter_opt_in = 'No';",
]


@pytest.mark.parametrize("text", FLAG_RECORDS)
def test_a_flag_for_a_stated_predicate_is_admitted_as_own(text: str) -> None:
    a = assess(text, origin="self")
    assert a.admit and a.risk < 0.5, a.reasons


@pytest.mark.parametrize("text", HIJACKS)
def test_a_flag_in_place_of_a_named_value_is_a_hijack(text: str) -> None:
    a = assess(text, origin="peer")
    assert not a.admit
    assert any("answer hijack" in r for r in a.reasons), a.reasons
