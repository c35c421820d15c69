"""Update language of every class marks a superseding note (issue 31 item 5; held back last
round on phrasings the first lexicon missed).

The kind: a newer note that corrects, updates, revises, retracts, re-dates, retires or
restates-with-before/after what older notes on its topic said must rank first for a question
both answer, whatever the topic and whatever update words it uses. Each member below is a
different topic and a different class of update language (none is a phrasing of
tests/test_supersession.py), written among 58 unrelated notes, under three policies.
"""

from __future__ import annotations

import random

import pytest

from memcurator import Memory
from memcurator.lifecycle.versions import supersedes

# (older note, newer note, question, a word only the newer note's answer has)
MEMBERS = [
    ("The staging deploy uses tool alpha.", "Correction: the staging deploy uses tool beta.",
     "which tool does the staging deploy use", "beta"),
    ("The staging deploy uses tool alpha.",
     "Update: staging deploys are done with tool beta going forward.",
     "which tool does the staging deploy use", "beta"),
    ("The on-call phone number is 555-0100.",
     "Ignore the previous note: the on-call phone number is 555-0199.",
     "what is the on-call phone number", "0199"),
    ("Reports are emailed to ops@corp.test every Monday.",
     "Effective immediately, reports go to reports@corp.test every Monday.",
     "where are the reports emailed", "reports@"),
    ("The database password rotates every 90 days.",
     "Revised policy: the database password rotates every 30 days.",
     "how often does the database password rotate", "30 days"),
    ("Use port 8080 for the admin console.",
     "The admin console moved to port 9443; port 8080 is deprecated.",
     "which port is the admin console on", "9443"),
    ("The team standup is at 9:00.", "Standup is at 10:30 starting this week.",
     "when is the team standup", "10:30"),
    ("Customer refunds are approved by Alice.",
     "Customer refunds are now approved by Bob, not Alice.",
     "who approves customer refunds", "Bob"),
    ("The API rate limit is 100 requests per minute.",
     "New rate limit for the API: 250 requests per minute (was 100).",
     "what is the API rate limit", "250"),
    ("Build artifacts are stored in bucket builds-old.",
     "Going forward, build artifacts live in bucket builds-2026.",
     "where are build artifacts stored", "builds-2026"),
    ("Invoices are filed under the finance share.",
     "Erratum: invoices are filed under the accounting share, not finance.",
     "where are invoices filed", "accounting"),
    ("Nightly backups keep 7 days of snapshots.",
     "Nightly backups keep 14 days of snapshots; the 7-day retention is obsolete.",
     "how many days of snapshots do nightly backups keep", "14 days"),
]  # fmt: skip


def _noise(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    topics = ["log shipper", "cache layer", "metrics agent", "ticket queue", "mail relay",
              "DNS resolver", "CI runner", "print server"]  # fmt: skip
    return [
        f"Ops note {seed}-{i}: the {rnd.choice(topics)} restarts nightly at {i % 24}:00 "
        f"and pages team {rnd.choice('ABCDEF')}."
        for i in range(n)
    ]


@pytest.mark.parametrize("policy", ["curator", "keep-all", "lru"])
@pytest.mark.parametrize("member", range(len(MEMBERS)))
def test_the_newer_note_ranks_first(policy: str, member: int) -> None:
    older, newer, question, answer = MEMBERS[member]
    mem = Memory(policy=policy, max_bytes=None)
    for t in _noise(30, member):
        mem.write(t)
    old_id = mem.write(older).id
    for t in _noise(28, member + 100):
        mem.write(t)
    new_id = mem.write(newer).id
    got = mem.recall(question, k=5)
    assert got.ids[0] == new_id and answer in got.entries[0].text
    assert old_id in got.ids  # still recalled, below the note that replaces it


@pytest.mark.parametrize("member", range(len(MEMBERS)))
def test_the_older_note_alone_is_no_superseder(member: int) -> None:
    assert supersedes(MEMBERS[member][1]) and not supersedes(MEMBERS[member][0])


@pytest.mark.parametrize(
    "text",
    [
        "New hires get a laptop on day one.",
        "Use the new schema file for migrations.",
        "Starting the service requires root.",
        "The build was slow on Monday.",
        "We moved fast and shipped.",
        "The report starts from column B.",
        "SELECT now() FROM t;",
        "Task: update the price\nAction: UPDATE items SET price = 3 WHERE id = 1;",
        # plain records (SQL words and a note with no marker)
        "UPDATE staff SET updated_at = now() WHERE id = 3;",
        "SELECT REPLACE(name, 'a', 'b') FROM t;",
        "Task: count rows of t\nAction: SELECT COUNT(*) FROM t;",
        "The staging deploy uses tool alpha.",
    ],
)
def test_everyday_words_are_no_update_language(text: str) -> None:
    assert not supersedes(text)
