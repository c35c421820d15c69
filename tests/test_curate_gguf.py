"""JitMem's LLM curator and judge with the bundled GGUF model (slow: marked ``llm``)."""

import numpy as np
import pytest

from memcurator.curate.base import CurateContext
from memcurator.curate.jitmem import JitMemCurator
from memcurator.curate.llm import judge
from memcurator.types import Entry

RAW = (
    "Task: Record that member 102 paid 75 dollars.\n"
    "Observation: Table payments(member_id INT, amount INT)\n"
    "Action: INSERT INTO payments (member_id, amount) VALUES (102, 75);\n"
    "Outcome: success (reward 1, solver expert)"
)


@pytest.mark.llm
def test_llm_curator_and_judge_with_the_bundled_model():
    pytest.importorskip("llama_cpp")
    from memcurator.llm import create_executor

    ex = create_executor("gguf")
    e = Entry("e1", "ns", "raw", RAW, len(RAW), len(RAW), np.zeros(4, np.float32))
    cur = JitMemCurator(operators=["llm-adapt"], max_tokens=48)
    r = cur.curate(
        CurateContext(
            "Record that member 205 paid 90 dollars.",
            lambda q, k: [],
            bank=lambda: [e],
            observation="Table payments(member_id INT, amount INT)",
            executor=ex,
        )
    )
    (call,) = r.calls
    assert call.ok and call.tokens_in > 50 and call.cost_usd == 0.0 and call.proxy_s > 0
    assert r.payload  # the model's payload, or the logged fallback when it wrote nothing usable
    assert r.notes == [] or "fell back to align" in r.notes[0]
    verdict, comp = judge(ex, "Count rows of t", "Table t(a INT)", "SELECT COUNT(*) FROM t;",
                          "result: (3,)")  # fmt: skip
    assert comp is not None and comp.tokens_out <= 4
    assert verdict in (True, False, None)
