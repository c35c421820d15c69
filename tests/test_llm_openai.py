import json

import httpx
import pytest

from memcurator.errors import InvalidInput, LLMError
from memcurator.llm.openai_compat import OpenAICompatExecutor


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        self.t += 0.5
        return self.t


def make(handler, **kw):
    client = httpx.Client(transport=httpx.MockTransport(handler))
    kw.setdefault("base_url", "http://llm.test/v1/")
    kw.setdefault("model", "m1")
    return OpenAICompatExecutor(client=client, clock=Clock(), **kw)


def ok_chat(request):
    body = json.loads(request.content)
    assert request.url == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert body == {
        "model": "m1",
        "max_tokens": 16,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "Write SQL"}],
        "stop": [";"],
    }
    return httpx.Response(
        200,
        json={
            "choices": [{"message": {"role": "assistant", "content": "SELECT 1"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        },
    )


def test_chat_success_accounts_tokens_latency_cost():
    ex = make(ok_chat, api_key="sk-test", price_in=1.0, price_out=2.0)
    c = ex.complete("Write SQL", max_tokens=16, stop=[";"])
    assert (c.text, c.tokens_in, c.tokens_out, c.model) == ("SELECT 1", 12, 3, "m1")
    assert c.latency_s == pytest.approx(0.5)
    assert c.cost_usd == pytest.approx((12 * 1.0 + 3 * 2.0) / 1e6)
    assert "sk-test" not in repr(ex)


def test_raw_completion_endpoint_and_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def handler(request):
        assert request.url.path == "/v1/completions"
        assert "authorization" not in request.headers
        assert json.loads(request.content)["prompt"] == "SELECT"
        return httpx.Response(
            200,
            json={
                "choices": [{"text": " 1;"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2},
            },
        )

    c = make(handler, chat=False).complete("SELECT")
    assert (c.text, c.tokens_in, c.tokens_out, c.cost_usd) == (" 1;", 1, 2, 0.0)


def test_environment_defaults(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://fallback/v1")
    monkeypatch.setenv("MEMCURATOR_OPENAI_BASE_URL", "http://mine/v1")
    monkeypatch.setenv("MEMCURATOR_OPENAI_MODEL", "envmodel")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    seen = {}

    def handler(request):
        seen["url"] = str(request.url)
        seen["auth"] = request.headers.get("authorization")
        seen["model"] = json.loads(request.content)["model"]
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": "x"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            },
        )

    ex = OpenAICompatExecutor(client=httpx.Client(transport=httpx.MockTransport(handler)))
    ex.complete("hi")
    assert seen == {
        "url": "http://mine/v1/chat/completions",
        "auth": "Bearer sk-env",
        "model": "envmodel",
    }
    assert ex.base_url is None and ex.model is None  # hyperparameters stored as given


def test_no_model_is_invalid(monkeypatch):
    monkeypatch.delenv("MEMCURATOR_OPENAI_MODEL", raising=False)
    with pytest.raises(InvalidInput, match="MEMCURATOR_OPENAI_MODEL"):
        OpenAICompatExecutor(base_url="http://x/v1")


def test_http_500_is_llm_error():
    ex = make(lambda r: httpx.Response(500, text="upstream exploded"))
    with pytest.raises(LLMError, match="HTTP 500.*upstream exploded"):
        ex.complete("hi")


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>not json</html>"),
        httpx.Response(200, json={"choices": [], "usage": {}}),
        httpx.Response(200, json={"choices": [{"message": {"content": "x"}}]}),
        httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": None}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 0},
            },
        ),
        httpx.Response(200, json=["not", "an", "object"]),
    ],
)
def test_malformed_response_is_llm_error(response):
    ex = make(lambda r: response)
    with pytest.raises(LLMError):
        ex.complete("hi")


def test_transport_failure_is_llm_error():
    def handler(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(LLMError, match="ConnectError"):
        make(handler).complete("hi")
