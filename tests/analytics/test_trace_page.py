"""The decision trace page: staff who may view routing decisions see every tenant's,
members of a tenant their own (tests/analytics/test_pages.py), and no one else."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from flywheel.models import Tenant
from routing.models import RoutingDecision

pytestmark = pytest.mark.django_db

QUESTION = "Please review my pull request"


@pytest.fixture
def path(tenant: Tenant) -> str:
    decision = RoutingDecision.objects.create(tenant=tenant, question=QUESTION, outcome="success")
    return f"/decisions/{decision.request_id}"


def _client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _staff(*permissions: str) -> User:
    user = User.objects.create_user("operator", password="x", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def test_staff_without_the_view_permission_get_403(path: str) -> None:
    response = _client_for(_staff("view_backend")).get(path)

    assert response.status_code == 403
    assert QUESTION not in response.content.decode()


def test_staff_with_the_view_permission_see_the_decision(path: str) -> None:
    response = _client_for(_staff("view_routingdecision")).get(path)

    assert response.status_code == 200
    assert QUESTION in response.content.decode()


def test_a_superuser_sees_the_decision(path: str, admin_client: Client) -> None:
    response = admin_client.get(path)

    assert response.status_code == 200
    assert QUESTION in response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in(path: str) -> None:
    response = Client().get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert f"next={path}" in response["Location"]


def test_a_person_who_is_not_staff_and_acts_for_no_tenant_is_refused(path: str) -> None:
    user = User.objects.create_user("someone", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_routingdecision"))

    response = _client_for(user).get(path)

    assert response.status_code == 403
    assert QUESTION not in response.content.decode()


def test_staff_without_the_permission_get_403_for_an_unknown_decision_too() -> None:
    response = _client_for(_staff()).get("/decisions/00000000-0000-0000-0000-000000000000")

    assert response.status_code == 403
