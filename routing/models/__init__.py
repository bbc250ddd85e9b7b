"""Routing's models, one module per subject; Django finds them all through this package.

Intents and their rules (rules), the routing policy (policy), sessions and their turns
(sessions), examples and learned classifiers (learning), A/B splits per intent
(splits), and what routing did: one
decision per query, one performance record per attempt (decisions).
"""

from routing.models.decisions import (
    ANSWERED_OUTCOMES,
    IntentMethod,
    Outcome,
    PerformanceRecord,
    QueryType,
    RoutingDecision,
    RoutingMethod,
    with_request_id,
)
from routing.models.learning import (
    ClassifierKind,
    ClassifierModel,
    ExampleSource,
    IntentExample,
    QueryTypeExample,
)
from routing.models.policy import RoutingPolicy
from routing.models.rules import Intent, IntentPattern, PatternKind, QueryScope, ScopePattern
from routing.models.sessions import Session, Turn
from routing.models.splits import Split, SplitArm

__all__ = [
    "ANSWERED_OUTCOMES",
    "ClassifierKind",
    "ClassifierModel",
    "ExampleSource",
    "Intent",
    "IntentExample",
    "IntentMethod",
    "IntentPattern",
    "Outcome",
    "PatternKind",
    "PerformanceRecord",
    "QueryScope",
    "QueryType",
    "QueryTypeExample",
    "RoutingDecision",
    "RoutingMethod",
    "RoutingPolicy",
    "ScopePattern",
    "Session",
    "Split",
    "SplitArm",
    "Turn",
    "with_request_id",
]
