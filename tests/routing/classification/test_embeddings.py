"""Optional embeddings: the nearest examples vote with the learned classifiers.

The endpoint is mocked (respx) in the shape of OpenAI's ``POST /v1/embeddings``
answer; its vectors are a hashed bag of words, so similar wording is near.
"""

from __future__ import annotations

import json
import logging
import math
import re
import zlib

import httpx
import numpy as np
import pytest
import respx
from asgiref.sync import async_to_sync
from django.test import override_settings

from routing.answering.classify import classify_intent
from routing.classification import training
from routing.classification.embeddings import embeddings_forget
from routing.classification.learned import neighbours_of, train
from routing.classification.training import (
    classifier_current,
    classifier_train,
    classifiers_forget,
)
from routing.install import defaults_load
from routing.models import ClassifierKind, ClassifierModel, Intent, IntentExample
from routing.selection.state import forget, routing_state

URL = "http://embeddings.test/v1/embeddings"
SETTINGS = {
    "EMBEDDINGS_BASE_URL": "http://embeddings.test/v1",
    "EMBEDDINGS_API_KEY": "sk-EMBEDDINGS-SECRET",
    "EMBEDDINGS_MODEL": "embed-small",
}
DIMENSIONS = 64
QUESTION = "Give me a creative writing prompt about a lighthouse keeper"


def _vector(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in text.lower().split():
        vector[zlib.crc32(word.strip("?.!,").encode()) % DIMENSIONS] += 1.0
    return vector


def _answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    data = [
        {"object": "embedding", "index": i, "embedding": _vector(text)}
        for i, text in enumerate(body["input"])
    ]
    tokens = sum(len(text.split()) for text in body["input"])
    return httpx.Response(
        200,
        json={
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        },
    )


def _inputs(route: respx.Route) -> list[str]:
    return [text for call in route.calls for text in json.loads(call.request.content)["input"]]


@pytest.fixture
def examples(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    defaults_load()
    monkeypatch.setattr(training, "RECHECK_SECONDS", 0.0)
    classifiers_forget()
    embeddings_forget()


# --- the vote -----------------------------------------------------------------------------


def test_the_nearest_examples_vote_half_with_the_model() -> None:
    texts = ["write a poem", "write a story", "fix my code", "review my code"]
    labels = ["creative", "creative", "code", "code"]
    model = train(texts, labels)
    vectors = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]
    near = neighbours_of("m", vectors, [model.labels.index(label) for label in labels])
    model = type(model)(**{**model.__dict__, "neighbours": near})
    alone = model.predict("write my code")

    voted = model.predict("write my code", np.array([0.0, 1.0]))  # among the code examples

    assert voted.voted
    assert not alone.voted
    sims = {"creative": 0.0 + 0.1 / math.hypot(0.9, 0.1), "code": 1.0 + 0.9 / math.hypot(0.1, 0.9)}
    vote = {label: s / sum(sims.values()) for label, s in sims.items()}
    for label in model.labels:
        expected = (alone.probabilities[label] + vote[label]) / 2
        assert voted.probabilities[label] == pytest.approx(expected, abs=1e-3)
    assert model.predict("write my code", np.array([1.0, 0.0, 0.0])) == alone  # other model


# --- training -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@respx.mock
@override_settings(**SETTINGS)
def test_training_stores_the_examples_vectors_and_asks_only_for_new_ones(
    examples: None,
) -> None:
    route = respx.post(URL).mock(side_effect=_answer)

    classifier_train(kind=ClassifierKind.INTENT)

    count = IntentExample.objects.filter(intent__enabled=True).count()
    assert sorted(_inputs(route)) == sorted(
        IntentExample.objects.filter(intent__enabled=True).values_list("text", flat=True)
    )
    assert route.call_count == math.ceil(count / 100)
    assert all(
        c.request.headers["authorization"] == "Bearer sk-EMBEDDINGS-SECRET" for c in route.calls
    )
    stored = ClassifierModel.objects.filter(kind="intent").first()
    assert stored is not None
    assert stored.artefact["neighbours"]["model"] == "embed-small"
    assert len(stored.artefact["neighbours"]["vectors"]) == count
    route.reset()

    IntentExample.objects.create(  # retrains on commit (the task runs eagerly in tests)
        intent=Intent.objects.get(slug="creative-orientation"), text="Pen a sonnet about rain"
    )

    assert _inputs(route) == ["Pen a sonnet about rain"]
    newest = classifier_current(ClassifierKind.INTENT)
    assert newest is not None
    assert newest.neighbours is not None
    assert len(newest.neighbours.vectors) == count + 1


@pytest.mark.django_db(transaction=True)
@respx.mock
@override_settings(**SETTINGS)
def test_a_failing_endpoint_at_training_leaves_the_model_alone_and_is_retried(
    examples: None, caplog: pytest.LogCaptureFixture
) -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(503))

    with caplog.at_level(logging.WARNING):
        first = classifier_train(kind=ClassifierKind.INTENT)

    assert first is not None
    assert first.artefact["neighbours"] is None
    assert "Embeddings unavailable for training: HTTPStatusError" in caplog.text
    assert "sk-EMBEDDINGS-SECRET" not in caplog.text
    route.mock(side_effect=_answer)

    second = classifier_train(kind=ClassifierKind.INTENT)  # beat's next check

    assert second is not None
    assert second.pk != first.pk
    assert second.artefact["neighbours"] is not None


# --- questions ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@respx.mock
def test_a_question_the_model_is_asked_about_is_embedded_and_its_neighbours_vote(
    examples: None,
) -> None:
    route = respx.post(URL).mock(side_effect=_answer)
    with override_settings(**SETTINGS):
        classifier_train(kind=ClassifierKind.INTENT)
        forget()
        route.reset()

        result = async_to_sync(classify_intent)(routing_state(), QUESTION, [], None)
        again = async_to_sync(classify_intent)(routing_state(), QUESTION, [], None)

    assert (result.intent, result.method) == ("creative-orientation", "model")
    assert result.evidence[0].startswith("model v")
    assert "with the nearest examples" in (result.evidence[0])
    assert re.fullmatch(  # in words: the two likeliest intents
        r"the learned model \(v\d+ with the nearest examples\): 0\.\d\d creative-orientation, "
        r"0\.\d\d [a-z-]+",
        result.summary,
    ), result.summary
    assert _inputs(route) == [QUESTION]  # asked once: the vector is kept for next time
    assert again == result


@pytest.mark.django_db(transaction=True)
@respx.mock
def test_confident_rules_do_not_wait_for_an_embedding(examples: None) -> None:
    route = respx.post(URL).mock(side_effect=_answer)
    with override_settings(**SETTINGS):
        classifier_train(kind=ClassifierKind.INTENT)
        forget()
        route.reset()

        result = async_to_sync(classify_intent)(
            routing_state(), "Please review this pull request for bugs", [], None
        )

    assert result.method == "rules"
    assert not route.called


@pytest.mark.django_db(transaction=True)
@respx.mock
def test_a_failing_endpoint_at_question_time_changes_nothing(
    examples: None, caplog: pytest.LogCaptureFixture
) -> None:
    route = respx.post(URL).mock(side_effect=_answer)
    with override_settings(**SETTINGS):
        classifier_train(kind=ClassifierKind.INTENT)
        forget()
        model = classifier_current(ClassifierKind.INTENT)
        assert model is not None
        route.mock(side_effect=httpx.ConnectError("refused"))

        with caplog.at_level(logging.WARNING):
            result = async_to_sync(classify_intent)(routing_state(), QUESTION, [], None)

    alone = model.predict(QUESTION)
    assert (result.intent, result.method) == ("creative-orientation", "model")
    assert result.evidence[0] == (
        f"model v{model.version}: {alone.label} at {alone.confidence:.2f}"
    )
    assert "Embeddings unavailable for a question: ConnectError" in caplog.text
    assert "sk-EMBEDDINGS-SECRET" not in caplog.text


@pytest.mark.django_db(transaction=True)
@respx.mock(assert_all_called=False)
def test_without_the_setting_nothing_is_sent(examples: None) -> None:
    route = respx.post(URL).mock(side_effect=_answer)
    classifier_train(kind=ClassifierKind.INTENT)
    forget()

    result = async_to_sync(classify_intent)(routing_state(), QUESTION, [], None)

    assert result.method == "model"
    assert "nearest" not in result.evidence[0]
    assert not route.called
    stored = ClassifierModel.objects.filter(kind="intent").first()
    assert stored is not None
    assert stored.artefact["neighbours"] is None
