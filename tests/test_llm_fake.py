import pytest

from memcurator.errors import InvalidInput, LLMError
from memcurator.llm import MeteredExecutor, Usage
from memcurator.llm.base import Completion, Executor
from memcurator.llm.fake import ScriptedExecutor
from memcurator.llm.latency import MEMPILOT_ORCHESTRATOR, AffineLatency


def test_dict_responder_and_accounting():
    ex = ScriptedExecutor({"abcdefgh": "SELECT 1;"})
    c = ex.complete("abcdefgh")
    assert c == Completion("SELECT 1;", 2, 3, 0.0, 0.0, "scripted")
    assert ex.prompts == ["abcdefgh"]
    assert isinstance(ex, Executor)


def test_callable_responder_stop_and_max_tokens():
    ex = ScriptedExecutor(lambda p: p + " END more", tokens_per_char=1.0)
    assert ex.complete("x", stop=[" MORE", " END"]).text == "x"
    assert ex.complete("abcdef", max_tokens=3).text == "abc"


def test_unscripted_prompt_and_bad_input():
    ex = ScriptedExecutor({})
    with pytest.raises(LLMError, match="no scripted response"):
        ex.complete("Q")
    with pytest.raises(InvalidInput):
        ex.complete("")
    with pytest.raises(InvalidInput):
        ex.complete("Q", max_tokens=0)
    with pytest.raises(InvalidInput):
        ex.complete("Q", stop=[""])
    with pytest.raises(InvalidInput):
        ScriptedExecutor({}, tokens_per_char=0)
    with pytest.raises(LLMError, match="expected str"):
        ScriptedExecutor(lambda p: 3).complete("Q")  # type: ignore[arg-type, return-value]


def test_metered_shares_usage():
    usage = Usage()
    a = MeteredExecutor(ScriptedExecutor(lambda p: "ok"), usage)
    b = MeteredExecutor(ScriptedExecutor(lambda p: "ok"), usage)
    a.complete("1234")
    b.complete("12345678")
    assert usage.as_dict() == {
        "calls": 2,
        "cached_calls": 0,
        "tokens_in": 3,
        "tokens_out": 2,
        "latency_s": 0.0,
        "cost_usd": 0.0,
    }
    assert (a.name, a.model_id, a.temperature) == ("fake", "scripted", 0.0)


def test_affine_latency_fit_recovers_coefficients():
    true = AffineLatency(0.3, 2e-4, 0.03)
    pairs = [(50, 5), (600, 40), (300, 10), (1000, 60), (120, 30)]
    cs = [Completion("", i, o, true(i, o), 0.0, "m") for i, o in pairs]
    fit = AffineLatency.fit(cs)
    assert fit.b_s == pytest.approx(0.3) and fit.a_out_s == pytest.approx(0.03)
    assert MEMPILOT_ORCHESTRATOR(0, 0) == pytest.approx(0.332)
    with pytest.raises(InvalidInput):
        AffineLatency.fit(cs[:2])
    with pytest.raises(InvalidInput):
        AffineLatency.fit([Completion("", 10, 1, 0.1, 0.0, "m")] * 4)
