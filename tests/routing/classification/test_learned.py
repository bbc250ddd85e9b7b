"""The classifiers learned from examples: the model, its training and versions, the cascade."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from flywheel.cache import shared_cache
from flywheel.errors import ValidationError
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.answering.classify import classify_intent, decide_query_type
from routing.classification import training
from routing.classification.cascade import cascade, classify_by_rules, settle
from routing.classification.corrections import decision_correct
from routing.classification.learned import (
    LearnedModel,
    _pipeline,
    char_ngrams,
    export,
    train,
    word_ngrams,
)
from routing.classification.query_type import (
    below_threshold,
    classify_query_type,
    type_cascade,
)
from routing.classification.rules import default_rules
from routing.classification.training import (
    SHIPPED_DIR,
    classifier_current,
    classifier_train,
    classifiers_forget,
)
from routing.install import defaults_load
from routing.models import (
    ClassifierKind,
    ClassifierModel,
    ExampleSource,
    Intent,
    IntentExample,
    QueryTypeExample,
    RoutingDecision,
    ScopePattern,
)
from routing.recording.decision import DecisionData
from routing.recording.store import decisions_record
from routing.selection.state import forget, routing_policy_get, routing_state
from tests.paths import DATA

THRESHOLD = 0.7  # the policy's default confidence threshold


def rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def shipped() -> dict[str, LearnedModel]:
    """The models load_defaults trains: on the shipped examples alone."""
    intents = rows(SHIPPED_DIR / "intents.jsonl")
    types = rows(SHIPPED_DIR / "query_types.jsonl")
    return {
        "intent": train([r["text"] for r in intents], [r["intent"] for r in intents]),
        "query_type": train([r["text"] for r in types], [r["query_type"] for r in types]),
    }


# --- the model ------------------------------------------------------------------------


def test_the_exported_model_answers_as_scikit_learn_does() -> None:
    examples = rows(SHIPPED_DIR / "intents.jsonl")
    texts, labels = [r["text"] for r in examples], [r["intent"] for r in examples]
    pipeline = _pipeline().fit(texts, labels)
    model = export(pipeline, examples=len(texts), accuracy=0.0)
    model = LearnedModel.from_json(json.loads(json.dumps(model.as_json())))  # as stored
    questions = [r["question"] for r in rows(DATA / "intent_final.jsonl")]
    word, char = (v.build_analyzer() for _, v in pipeline.steps[0][1].transformer_list)

    assert all(word(q) == word_ngrams(q) and char(q) == char_ngrams(q) for q in questions)
    expected = pipeline.predict_proba(questions)
    for question, probabilities in zip(questions, expected, strict=True):
        ours = model.predict(question).probabilities
        for label, p in zip(pipeline.classes_, probabilities, strict=True):
            assert ours[label] == pytest.approx(p, abs=1e-4)


def test_short_and_odd_text_is_classified_without_error(shipped: dict[str, LearnedModel]) -> None:
    model = shipped["intent"]
    for text in ["", "?", "a", "  \t\n ", "日本語のテキスト", "x" * 5000]:
        prediction = model.predict(text)
        assert prediction.label in model.labels
        assert sum(prediction.probabilities.values()) == pytest.approx(1.0, abs=1e-3)


# Placeholder text that load generators, health probes and people testing send: none of
# it names a task, so none of it may be sent to a specialist flow or answered locally.
PLACEHOLDERS = [
    "test",
    "question 7",
    "query 12",
    "this is a test",
    "just testing this",
    "test test test",
    "load test question 7",
    "sample question 3 for you",
    "hello how are you",
    "ping",
]


def test_placeholder_text_gets_no_specialist_intent(shipped: dict[str, LearnedModel]) -> None:
    rules = default_rules()
    labelled = {
        q: settle(cascade(rules, shipped["intent"], q, [], THRESHOLD), THRESHOLD).intent
        for q in PLACEHOLDERS
    }
    assert labelled == dict.fromkeys(PLACEHOLDERS, "general")


# --- measured, on every set the model was not trained on ---------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("intent_*.jsonl")))
def test_the_cascade_labels_at_least_95_percent_and_never_less_than_rules_alone(
    name: str, shipped: dict[str, LearnedModel]
) -> None:
    rules, model = default_rules(), shipped["intent"]
    labelled = rows(DATA / name)
    by_rules = sum(
        settle(classify_by_rules(rules, r["question"]), THRESHOLD).intent == r["intent"]
        for r in labelled
    )
    by_cascade = sum(
        settle(cascade(rules, model, r["question"], [], THRESHOLD), THRESHOLD).intent == r["intent"]
        for r in labelled
    )
    assert by_cascade >= by_rules
    assert by_cascade / len(labelled) >= 0.95


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("querytype_*.jsonl")))
def test_query_types_are_labelled_at_least_90_percent_and_well_above_rules_alone(
    name: str, shipped: dict[str, LearnedModel]
) -> None:
    rules, model = default_rules(), shipped["query_type"]
    labelled = rows(DATA / name)
    assert len(labelled) >= 100

    def accuracy(decide: Any) -> float:
        right = sum(
            below_threshold(decide(r["question"]), THRESHOLD).query_type == r["query_type"]
            for r in labelled
        )
        return right / len(labelled)

    by_rules = accuracy(lambda q: classify_query_type(rules, q))
    by_cascade = accuracy(lambda q: type_cascade(rules, model, q, THRESHOLD))
    assert by_cascade >= by_rules + 0.3
    assert by_cascade >= 0.90


# --- versions, in every process ----------------------------------------------------------


@pytest.fixture
def examples(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    defaults_load()  # the shipped examples, no model yet
    monkeypatch.setattr(training, "RECHECK_SECONDS", 0.0)
    classifiers_forget()


@pytest.mark.django_db(transaction=True)
def test_training_stores_a_version_once_per_set_of_examples(examples: None) -> None:
    assert classifier_current(ClassifierKind.INTENT) is None

    first = classifier_train(kind=ClassifierKind.INTENT)
    again = classifier_train(kind=ClassifierKind.INTENT)

    assert first is not None
    assert again == first  # the same examples: no new version
    assert first.examples == IntentExample.objects.count() >= 7 * 30
    assert 0.6 < first.accuracy <= 1.0
    current = classifier_current(ClassifierKind.INTENT)
    assert current is not None
    assert current.version == first.pk


@pytest.mark.django_db(transaction=True)
def test_a_new_example_retrains_and_every_process_takes_the_new_version(
    examples: None,
) -> None:
    first = classifier_train(kind=ClassifierKind.INTENT)
    assert first is not None

    IntentExample.objects.create(  # the task runs at commit (eagerly in the tests)
        intent=Intent.objects.get(slug="code-review"),
        text="does this loop ever terminate when the list is empty",
        source=ExampleSource.ADMIN,
    )

    newest = ClassifierModel.objects.filter(kind=ClassifierKind.INTENT).first()
    assert newest is not None
    assert newest.pk != first.pk
    assert newest.examples == first.examples + 1
    current = classifier_current(ClassifierKind.INTENT)
    assert current is not None
    assert current.version == newest.pk


@pytest.mark.django_db(transaction=True)
def test_load_defaults_leaves_trained_classifiers_without_a_worker() -> None:
    out = io.StringIO()

    call_command("load_defaults", stdout=out)

    kinds = set(ClassifierModel.objects.values_list("kind", flat=True))
    assert kinds == {ClassifierKind.INTENT, ClassifierKind.QUERY_TYPE}
    assert "Classifier: intent v" in out.getvalue()
    assert QueryTypeExample.objects.filter(source=ExampleSource.SHIPPED).count() >= 100


@pytest.mark.django_db(transaction=True)
def test_train_classifier_retrains_on_demand(examples: None) -> None:
    classifier_train(kind=ClassifierKind.QUERY_TYPE)
    out = io.StringIO()

    call_command("train_classifier", "--kind", "query_type", "--force", stdout=out)

    assert ClassifierModel.objects.filter(kind=ClassifierKind.QUERY_TYPE).count() == 2
    assert "Classifier: query_type v" in out.getvalue()


# --- in the query's cascade --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_new_phrasing_the_rules_miss_is_labelled_by_the_model(examples: None) -> None:
    classifier_train(kind=ClassifierKind.INTENT)
    forget()
    question = "Give me a creative writing prompt about a lighthouse keeper"
    assert classify_by_rules(routing_state().rules, question).confidence < THRESHOLD

    result = async_to_sync(classify_intent)(routing_state(), question, [], None)

    assert (result.intent, result.method) == ("creative-orientation", "model")
    assert result.evidence[0].startswith("model v")


@pytest.mark.django_db(transaction=True)
def test_confident_rules_keep_priority_over_the_model(examples: None) -> None:
    classifier_train(kind=ClassifierKind.INTENT)
    forget()

    result = async_to_sync(classify_intent)(
        routing_state(), "Please review my pull request", [], None
    )

    assert (result.intent, result.method) == ("code-review", "rules")


@pytest.mark.django_db(transaction=True)
def test_query_types_the_rules_miss_are_typed_by_the_model(examples: None) -> None:
    classifier_train(kind=ClassifierKind.QUERY_TYPE)
    forget()
    question = "Which recurring patterns show up throughout the dataset?"

    decision = async_to_sync(decide_query_type)(routing_state(), question)

    assert (decision.query_type, decision.method) == ("GLOBAL", "model")
    assert decision.global_weight > decision.local_weight


RANKED = "Where does the Denver warehouse rank among all our sites for late shipments?"


@pytest.mark.django_db(transaction=True)
def test_a_surer_model_overrules_a_generic_pattern(examples: None) -> None:
    classifier_train(kind=ClassifierKind.QUERY_TYPE)
    forget()
    by_rules = classify_query_type(routing_state().rules, RANKED)  # "where does": LOCAL

    decision = async_to_sync(decide_query_type)(routing_state(), RANKED)

    assert (by_rules.query_type, by_rules.confidence >= THRESHOLD) == ("LOCAL", True)
    assert (decision.query_type, decision.method) == ("HYBRID", "model")
    assert f"The rules said LOCAL at {by_rules.confidence:.2f}" in decision.reasoning


@pytest.mark.django_db(transaction=True)
def test_a_pattern_weighted_high_still_wins_over_the_model(examples: None) -> None:
    classifier_train(kind=ClassifierKind.QUERY_TYPE)
    ScopePattern.objects.create(scope="local", kind="keyword", pattern="denver", weight=5.0)
    forget()

    decision = async_to_sync(decide_query_type)(routing_state(), RANKED)

    assert (decision.query_type, decision.method) == ("LOCAL", "rules")


# --- corrections, in the admin -----------------------------------------------------------


def _decision(question: str, intent: str) -> RoutingDecision:
    tenant = Tenant.objects.get(slug="default")
    return RoutingDecision.objects.create(
        tenant=tenant, question=question, intent=intent, intent_method="rules", outcome="success"
    )


@pytest.mark.django_db(transaction=True)
def test_a_correction_in_the_admin_changes_the_next_answer(
    examples: None, admin_client: Client
) -> None:
    classifier_train(kind=ClassifierKind.INTENT)
    question = "Please review my pull request for the caching layer"
    decision = _decision(question, "code-review")
    page = admin_client.get(f"/admin/routing/routingdecision/{decision.pk}/correct/")
    assert page.status_code == 200
    assert question in page.content.decode()

    response = admin_client.post(
        f"/admin/routing/routingdecision/{decision.pk}/correct/", {"intent": "technical-analysis"}
    )

    assert response.status_code == 302
    decision.refresh_from_db()
    assert (decision.intent, decision.corrected_intent) == ("code-review", "technical-analysis")
    assert decision.corrected_at is not None
    example = IntentExample.objects.get(text=question)
    assert (example.intent.slug, example.source) == ("technical-analysis", "correction")
    forget()  # the routing state a query reads next (the model's version is rechecked)
    result = async_to_sync(classify_intent)(routing_state(), question, [], None)
    assert (result.intent, result.method) == ("technical-analysis", "example")


@pytest.mark.django_db(transaction=True)
def test_correcting_again_replaces_the_earlier_correction(examples: None) -> None:
    decision = _decision("how should we shard the events table", "code-review")

    decision_correct(decision=decision, intent="document-qa")
    decision_correct(decision=decision, intent="technical-analysis")

    corrections = IntentExample.objects.filter(source="correction")
    assert [(e.intent.slug, e.text) for e in corrections] == [
        ("technical-analysis", "how should we shard the events table")
    ]
    with pytest.raises(ValidationError):
        decision_correct(decision=decision, intent="no-such-intent")


@pytest.mark.django_db(transaction=True)
def test_correcting_needs_the_permission_to_add_examples(examples: None, client: Client) -> None:
    decision = _decision("what is a flywheel", "general")
    staff = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_routingdecision"))
    client.force_login(staff)

    response = client.post(
        f"/admin/routing/routingdecision/{decision.pk}/correct/", {"intent": "document-qa"}
    )

    assert response.status_code == 403
    assert not IntentExample.objects.filter(source="correction").exists()


# --- shown: the analytics API and page ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_classification_api_shows_methods_corrections_and_models(
    examples: None, admin_client: Client
) -> None:
    classifier_train(kind=ClassifierKind.INTENT)
    tenant = Tenant.objects.get(slug="default")
    for method, n in (("rules", 3), ("model", 1)):
        for i in range(n):
            RoutingDecision.objects.create(
                tenant=tenant,
                question=f"{method} {i}",
                intent="general",
                intent_method=method,
                outcome="success",
            )
    decision_correct(decision=RoutingDecision.objects.get(question="model 0"), intent="summarize")
    _, key = api_key_create(tenant=tenant, name="reader")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    body = api.get("/api/v1/analytics/classification").json()

    assert body["decisions"] == 4
    assert body["methods"] == [
        {"method": "rules", "decisions": 3, "share": 0.75},
        {"method": "model", "decisions": 1, "share": 0.25},
    ]
    assert body["corrections"] == [
        {"intent": "general", "corrected_to": "summarize", "decisions": 1}
    ]
    (intent_model,) = body["models"]
    assert intent_model["kind"] == "intent"
    assert intent_model["examples"] == IntentExample.objects.count()  # retrained on it
    assert body["examples"]["intent"]["correction"] == 1
    page = admin_client.get("/analytics/").content.decode()
    assert 'id="classification"' in page
    assert "Learned intent classifier: version" in page


@pytest.mark.django_db(transaction=True)
def test_the_admin_tries_a_question_through_every_step(
    examples: None, admin_client: Client
) -> None:
    classifier_train(kind=ClassifierKind.INTENT)
    listing = admin_client.get("/admin/routing/intent/").content.decode()
    assert "/admin/routing/intent/try/" in listing

    response = admin_client.post(
        "/admin/routing/intent/try/",
        {"question": "Give me a creative writing prompt about a lighthouse keeper"},
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Intent: <strong>creative-orientation</strong>" in page
    for step in ("labelled by a person", "rules", "learned model", "LLM"):
        assert f"<td>{step}</td>" in page
    assert "(unsure)" in page  # the rules were; the model decided
    assert 'id="try-query-type"' in page


# --- the LLM's labels, behind the policy's switch -----------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("switch", [True, False])
def test_llm_labels_become_examples_only_with_the_switch_on(examples: None, switch: bool) -> None:
    policy = routing_policy_get()
    policy.learn_from_llm = switch
    policy.save()
    tenant = Tenant.objects.get(slug="default")
    labelled = DecisionData(
        request_id=uuid.uuid4(),
        tenant_id=tenant.pk,
        question="thoughts on our setup?",
        outcome="success",
        intent="technical-analysis",
        intent_method="llm",
    )
    by_rules = replace(labelled, request_id=uuid.uuid4(), question="hi", intent_method="rules")

    decisions_record([labelled, by_rules])

    kept = IntentExample.objects.filter(source="llm")
    assert [(e.intent.slug, e.text) for e in kept] == (
        [("technical-analysis", "thoughts on our setup?")] if switch else []
    )


@pytest.mark.django_db(transaction=True)
def test_a_stale_announcement_is_corrected_by_the_next_check(examples: None) -> None:
    first = classifier_train(kind=ClassifierKind.INTENT)
    assert first is not None
    # A reader that found no number announced the version it read before a training.
    shared_cache().set(training.VERSION_KEY.format(kind="intent"), first.pk - 1, None)

    again = classifier_train(kind=ClassifierKind.INTENT)  # beat's check: no new examples

    assert again == first
    current = classifier_current(ClassifierKind.INTENT)
    assert current is not None
    assert current.version == first.pk


@pytest.mark.django_db(transaction=True)
def test_a_correction_overrides_what_people_said_before_even_of_a_long_question(
    examples: None,
) -> None:
    question = "why is the cache slow " * 400  # beyond what an index row could hold
    IntentExample.objects.create(
        intent=Intent.objects.get(slug="document-qa"), text=question, source=ExampleSource.ADMIN
    )
    decision = _decision(question, "document-qa")

    decision_correct(decision=decision, intent="technical-analysis")

    kept = IntentExample.objects.filter(text=question)
    assert [(e.intent.slug, e.source) for e in kept] == [("technical-analysis", "correction")]
