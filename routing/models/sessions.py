"""Sessions: the conversations Flywheel keeps, one turn per answered question."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant


class Session(models.Model):
    """A conversation: the turns Flywheel keeps so any backend can continue it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Its index is session_tenant_recent's first column.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "-updated_at"], name="session_tenant_recent")]

    def __str__(self) -> str:
        return str(self.id)


class Turn(models.Model):
    """One question and its answer within a session.

    Partitioned by day on created_at on PostgreSQL, as RoutingDecision is: there the
    one turn per decision is the writer's doing (a turn is written with its decision
    only), not a unique index, which would have to hold created_at."""

    # References without a database constraint (db_constraint=False): see RECORD_REFERENCE
    # (routing/models/decisions.py). The session's index is turn_session_recent's first column.
    session = models.ForeignKey(
        Session,
        on_delete=models.CASCADE,
        related_name="turns",
        db_constraint=False,
        db_index=False,
    )
    question = models.TextField()
    answer = models.TextField(blank=True)
    intent = models.CharField(max_length=50, blank=True)
    backend = models.ForeignKey(
        Backend,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    # The decision that answered this turn (turns stored before the link have none).
    decision = models.OneToOneField(
        "RoutingDecision",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="turn",
        db_constraint=False,
    )
    # When it was asked; a one-shot question's turn, written when it is continued, is
    # dated when its decision was (routing.recording.batch_sql).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["session", "-created_at"], name="turn_session_recent")]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.question[:40]}"
