"""Keep evicts only what the budget needs, and retires an entry only for another version of
its own request (issue 19, item 7).

Three properties, each over several members of its kind:

1. Every entry a Keep pass evicts was needed: given the entries kept, it would not fit back.
2. Entries that differ in a literal (user ids, quoted names, dates, decimals, identifiers)
   are distinct facts: never "redundant" or "superseded", whatever their cosine. Entries whose
   task lines are equal up to case and whitespace, or whose cosine reaches the same-request
   threshold with the same literals, are versions of one request: the older gives way.
3. A raw entry chosen as a victim is offered to the distiller first.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.lifecycle.context import default_vector_dtype
from memcurator.lifecycle.resident import why_same_request
from memcurator.retrieve.literals import literal_values

FILLERS = [
    "Task: count orders in 2021\nAction: SELECT COUNT(*) FROM orders WHERE year = 2021;",
    "Task: products in stock\nAction: SELECT * FROM products WHERE stock > 0;",
    "Task: average salary by department\n"
    "Action: SELECT department, AVG(salary) FROM employees GROUP BY department;",
    "Task: delete cancelled orders\nAction: DELETE FROM orders WHERE status = 'cancelled';",
]

# Each kind: three requests that differ only in one literal (distinct facts).
DISTINCT = {
    "user ids": ("get the email of user {}", ["17", "18", "19"]),
    "quoted regions": ("total sales in region {}", ["'north'", "'south'", "'east'"]),
    "dates": ("orders placed on {}", ["2021-03-04", "2021-03-05", "2022-03-04"]),
    "customers": ("open tickets of customer {}", ["3", "4", "5"]),
    "decimals": ("products cheaper than {}", ["5.25", "5.75", "5.5"]),
    "identifiers": ("row count of partition {}", ["p17", "p18", "p2021"]),
}


def _text(task: str, action: str = "SELECT 1;") -> str:
    return f"Task: {task}\nAction: {action}"


def _sizes(texts: list[str], policy: str = "curator") -> list[int]:
    """Stored bytes of each text, in the precision a budgeted namespace gets by default."""
    m = Memory(policy=policy, vector_dtype=default_vector_dtype(HashingEmbedder(), 1))
    return [m.get(m.write(t).id).bytes for t in texts]


# ---------------------------------------------------------------- 2: what one request is
@pytest.mark.parametrize("kind", sorted(DISTINCT))
def test_different_literals_are_different_requests(kind: str) -> None:
    pattern, values = DISTINCT[kind]
    for a in values:
        for b in values:
            if a != b:  # even at cosine 1.0
                assert (
                    why_same_request(_text(pattern.format(a)), pattern.format(b), 1.0, 0.99) is None
                )
        assert literal_values(pattern.format(a)) != ()


@pytest.mark.parametrize(
    "a,b,rule",
    [
        ("get the email of user 18", "Get The EMAIL of user 18", "task line equal"),
        ("get the email of user 18", "  get the email  of\tuser 18 ", "task line equal"),
        ("total sales in region 'north'", "TOTAL SALES IN REGION 'NORTH'", "task line equal"),
        ("get the email of user 18", "get the email of user 18?", "same literals"),
        ("orders placed on 2021-03-04", "orders placed on 2021-03-04 !", "same literals"),
    ],
)
def test_same_request_up_to_case_whitespace_or_near_identical(a: str, b: str, rule: str) -> None:
    why = why_same_request(_text(a, "x;"), _text(b, "y;"), 0.995, 0.99)
    assert why is not None and rule in why


def test_the_cosine_rule_follows_the_threshold() -> None:
    a, b = _text("get the email of user 18"), _text("get the email of user 18?")
    assert why_same_request(a, b, 0.98, 0.99) is None  # below the threshold
    assert why_same_request(a, b, 0.995, None) is None  # cosine rule off
    assert why_same_request(a, _text("GET the email of user 18"), 0.5, None) is not None


# ---------------------------------------------------------------- 1 and 2 through Memory
@pytest.mark.parametrize("kind", sorted(DISTINCT))
def test_one_eviction_needed_one_eviction_and_distinct_facts_stay_findable(kind: str) -> None:
    pattern, values = DISTINCT[kind]
    facts = [_text(pattern.format(v), f"SELECT x FROM t WHERE k = {v};") for v in values]
    texts = facts + FILLERS
    sizes = _sizes(texts)
    m = Memory(policy="curator", max_bytes=sum(sizes) - 1)  # one byte over: one eviction
    ids = [m.write(t).id for t in texts]
    ev = m.decisions(action="evict")
    assert len(ev) == 1
    assert not ev[0].reason.startswith(("redundant", "superseded"))
    assert m.used_bytes <= sum(sizes) - 1
    for v, eid in zip(values, ids, strict=False):
        if eid != ev[0].entry_id:
            assert m.recall(pattern.format(v), k=1).ids == [eid]


def test_the_reported_case_evicts_one_entry_and_keeps_user_18() -> None:
    """The reproduction of issue 19: three users plus four other tasks at 13,800 bytes."""
    m = Memory(max_bytes=13_800, vector_dtype="float32")  # as reported: float32 vectors
    users = {
        i: m.write(
            f"Task: get the email of user {i}\nAction: SELECT email FROM users WHERE id = {i};"
        ).id
        for i in (17, 18, 19)
    }
    for t in [
        "Task: count orders in 2021\nAction: SELECT COUNT(*) FROM orders WHERE year = 2021;",
        "Task: products cheaper than 5\nAction: SELECT * FROM products WHERE price < 5;",
        FILLERS[2],
        FILLERS[3],
    ]:
        m.write(t)
    ev = m.decisions(action="evict")
    assert len(ev) == 1 and not ev[0].reason.startswith(("redundant", "superseded"))
    assert m.used_bytes + ev[0].bytes > 13_800  # it was needed
    for i, eid in users.items():
        assert m.recall(f"get the email of user {i}", k=1).ids == [eid]


@pytest.mark.parametrize(
    "old_task,new_task,lit",
    [
        ("get the email of user 18", "Get the EMAIL of user 18", "18"),  # case
        ("get the email of user 18", "get  the email of user\t18", "18"),  # whitespace
        ("total sales in region 'north'", "Total sales in region 'NORTH'", "'north'"),
        ("get the email of user 18", "get the email of user 18?", "18"),  # cosine + literals
        ("products cheaper than 5.25", "products cheaper than 5.25 .", "5.25"),
        ("orders placed on 2021-03-04", "Orders placed on 2021-03-04", "'2021-03-04'"),
    ],
)
def test_a_version_of_the_same_request_is_the_one_evicted(
    old_task: str, new_task: str, lit: str
) -> None:
    old_t = _text(old_task, f"SELECT x FROM t WHERE k = {lit};")
    new_t = _text(new_task, f"SELECT x FROM t WHERE k = {lit} LIMIT 1;")
    texts = [old_t, new_t, *FILLERS]
    sizes = _sizes(texts)
    m = Memory(policy="curator", max_bytes=sum(sizes) - 1)
    old = m.write(old_t).id
    for _ in range(3):  # praise the older one: praise before its replacement is no proof
        m.feedback([old], 1.0)
    new = m.write(new_t).id
    evicted = [e for t in FILLERS for e in m.write(t).evicted]
    assert evicted == [old]
    (d,) = m.decisions(action="evict")
    assert d.reason.startswith("superseded") and new in d.reason


def test_versions_stay_when_the_budget_needs_no_eviction_of_them() -> None:
    """The version rule picks the victim; it does not evict a version the budget can hold."""
    old_t = _text("get the email of user 18", "SELECT email FROM users WHERE id = 18;")
    new_t = _text("Get the email of user 18", "SELECT email FROM users WHERE id = 18 LIMIT 1;")
    big = _text("inspect the orders table", "SELECT * FROM orders; -- " + "x" * 3000)
    sizes = _sizes([old_t, new_t, big])
    # over by more than one version's bytes: only evicting `big` brings the bytes under it
    budget = sum(sizes) - sizes[0] - 100
    m = Memory(policy="curator", max_bytes=budget)
    old, new = m.write(old_t).id, m.write(new_t).id
    for _ in range(3):  # both versions helped: they outrank `big`
        m.feedback([old, new], 1.0)
    w = m.write(big)
    assert w.evicted == [w.id] and {old, new} <= {e.id for e in m.entries()}
    # without the praise, the versions rank below `big`: then each one goes because it
    # does not fit beside `big` (every eviction still needed given the kept)
    m2 = Memory(policy="curator", max_bytes=budget)
    old2, new2 = m2.write(old_t).id, m2.write(new_t).id
    w2 = m2.write(big)
    assert sorted(w2.evicted) == sorted([old2, new2])
    assert all(m2.used_bytes + s > budget for s in sizes[:2])


# ---------------------------------------------------------------- 1: a random stream
def _stream(seed: int, n: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    ops: list[tuple[str, str]] = []
    kinds = sorted(DISTINCT)
    for k in range(n):
        r = rng.random()
        if r < 0.5:
            pattern, values = DISTINCT[kinds[int(rng.integers(len(kinds)))]]
            task = pattern.format(values[int(rng.integers(3))])
            if rng.random() < 0.5:
                task = task.upper()  # a version of that request
            ops.append(("write", _text(task, f"SELECT {k};")))
        elif r < 0.7:
            obs = " ".join(
                f"c{j}={int(rng.integers(1000))}" for j in range(int(rng.integers(10, 60)))
            )
            ops.append(
                ("raw", f"Task: inspect table t{k}\nObservation: {obs}\nAction: SELECT {k};")
            )
        else:
            ops.append(("write", _text(f"max score in batch {k}", f"SELECT MAX(s) FROM b{k};")))
        if rng.random() < 0.4:
            ops.append(("feedback", str(float(rng.random() < 0.6))))
    return ops


@pytest.mark.parametrize(
    "policy,max_bytes,seed",
    [
        ("curator", 9_000, 0),
        ("curator", 20_000, 1),
        ("curator/align", 15_000, 2),
        ("lru", 12_000, 3),
        ("recency", 12_000, 4),
        ("success-only", 15_000, 5),
    ],
)
@pytest.mark.parametrize("dtype", [None, "float32"])
def test_every_eviction_was_needed_given_the_kept(
    policy: str, max_bytes: int, seed: int, dtype: str | None
) -> None:
    if dtype is None:  # the default (binary) stores entries about 4x smaller: same pressure
        max_bytes //= 4
    m = Memory(policy=policy, max_bytes=max_bytes, vector_dtype=dtype)
    n_ev = 0
    last = None
    for op, arg in _stream(seed, 120):
        if op == "feedback":
            if last is not None and last in {e.id for e in m.entries()}:
                m.feedback([last], float(arg))
            continue
        w = m.write(arg, kind="raw" if op == "raw" else "insight")
        last = w.id if w.admitted else None
        if not w.evicted:
            continue
        b = {d.entry_id: d.bytes for d in m.decisions(action="evict") if d.entry_id in w.evicted}
        for eid in w.evicted:
            assert m.used_bytes + b[eid] > max_bytes, (eid, m.used_bytes, b[eid])
        n_ev += len(w.evicted)
    assert m.used_bytes <= max_bytes
    assert n_ev >= 5  # the budget bound


# ---------------------------------------------------------------- 3: distill first
class _Distiller:
    def __init__(self, short: str | None):
        self.short = short
        self.seen: list[str] = []

    def distill(self, text: str) -> str | None:
        self.seen.append(text)
        return self.short


@pytest.mark.parametrize("distils", [True, False])
def test_an_outranked_raw_version_is_offered_to_the_distiller_first(distils: bool) -> None:
    obs = " ".join(f"id{j}=row{j}" for j in range(150))
    old_t = f"Task: get the email of user 18\nObservation: {obs}\nAction: SELECT email;"
    new_t = _text("Get the email of user 18", "SELECT email FROM users WHERE id = 18;")
    short = "Task: get the email of user 18\nInsight: SELECT email FROM users WHERE id = 18;"
    sizes = _sizes([old_t, new_t, *FILLERS])
    budget = sum(sizes) - 500  # the raw version's observation is worth more than 500 bytes
    dist = _Distiller(short if distils else None)
    m = Memory(policy="curator", max_bytes=budget, distiller=dist)
    old = m.write(old_t, kind="raw").id
    m.write(new_t)
    results = [m.write(t) for t in FILLERS]
    assert old_t in dist.seen  # offered first, in either case
    evicted = [e for r in results for e in r.evicted]
    if distils:
        assert evicted == [] and m.get(old).kind == "insight"
        assert [d.entry_id for d in m.decisions(action="distill")] == [old]
    else:
        assert evicted == [old]
        assert m.decisions(action="evict")[0].reason.startswith("superseded")


def test_keep_follows_the_memorys_same_request_threshold() -> None:
    """``Memory(same_request=None)`` leaves only the equal-task-line rule in Keep too."""
    a = _text("get the email of user 18", "SELECT email FROM users WHERE id = 18;")
    b = _text("get the email of user 18?", "SELECT email FROM users WHERE id = 18 LIMIT 1;")
    for same_request, linked in ((0.99, True), (None, False)):
        m = Memory(policy="curator", same_request=same_request)
        ia, ib = m.write(a).id, m.write(b).id
        assert (ib in m._ctx.res.near.get(ia, {})) is linked
