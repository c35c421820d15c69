import pytest

from memcurator.errors import UnknownName
from memcurator.llm import EXECUTORS, create_executor
from memcurator.llm.fake import ScriptedExecutor
from memcurator.llm.openai_compat import OpenAICompatExecutor


def test_unknown_name_lists_registry():
    with pytest.raises(UnknownName) as e:
        create_executor("gpt")
    assert str(e.value) == "unknown executor 'gpt'; known: ['fake', 'gguf', 'openai']"
    assert isinstance(e.value, KeyError)


def test_create_by_name():
    assert sorted(EXECUTORS) == ["fake", "gguf", "openai"]
    assert isinstance(create_executor("fake", responder={"a": "b"}), ScriptedExecutor)
    ex = create_executor("openai", base_url="http://h/v1", model="m")
    assert isinstance(ex, OpenAICompatExecutor)


def test_registry_is_lazy():
    import subprocess
    import sys

    code = (
        "import sys, memcurator.llm; "
        "assert 'llama_cpp' not in sys.modules and 'httpx' not in sys.modules, "
        "[m for m in sys.modules if m in ('llama_cpp', 'httpx')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
