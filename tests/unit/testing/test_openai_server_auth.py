"""FakeOpenAIServer's ``GET /v1/models`` and ``api_key=``, through the real ``openai`` client."""

from __future__ import annotations

import openai
import pytest

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply


def client(server: FakeOpenAIServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)


def test_the_model_list_names_the_given_models_and_is_not_a_numbered_request():
    with FakeOpenAIServer([reply.text("hi")], models=["m-1", "m-\u00e9"]) as server:
        assert [m.id for m in client(server, "any").models.list()] == ["m-1", "m-\u00e9"]
        answer = client(server, "any").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert answer.choices[0].message.content == "hi"
    assert [r.number for r in server.requests] == [1]
    assert server.get_paths == ["/v1/models"]


def test_without_api_key_any_key_is_accepted_and_other_gets_are_404():
    with FakeOpenAIServer() as server:
        assert [m.id for m in client(server, "whatever").models.list()] == ["fake-model"]
        with pytest.raises(openai.NotFoundError):
            client(server, "whatever").models.retrieve("fake-model")


def test_with_api_key_another_key_gets_401_without_the_key_echoed_and_consumes_no_reply():
    with FakeOpenAIServer([reply.text("for the right key")], api_key="sk-right") as server:
        with pytest.raises(openai.AuthenticationError) as refused:
            client(server, "sk-wrong").models.list()
        assert "sk-wrong" not in str(refused.value)
        with pytest.raises(openai.AuthenticationError):
            client(server, "sk-wrong").responses.create(model="m", input="x")
        answer = client(server, "sk-right").responses.create(model="m", input="x")
        assert [m.id for m in client(server, "sk-right").models.list()] == ["fake-model"]
    assert answer.output_text == "for the right key"
    assert [(r.number, r.status) for r in server.requests] == [(1, 401), (2, 200)]
