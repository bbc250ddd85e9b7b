"""Optional: the nearest examples by embedding vote with the learned classifiers.

With EMBEDDINGS_BASE_URL set (any OpenAI-compatible ``/embeddings`` endpoint),
training asks for the examples' vectors and stores them with the model
(routing.classification.learned.Neighbours); each example's vector is cached in the shared
cache under its text, so a retraining asks only for new examples. A question
the model is consulted on is embedded too (its vector kept in this process for
the next time it is asked), and its nearest examples vote
(LearnedModel.predict).

Without the setting nothing is asked and nothing changes. Any failure
(timeout, HTTP error, an answer that does not parse) means "no vote": the
model alone decides. The API key never appears in a log line or an error.
Requests go out through the one HTTP layer (backends/http/openai.py).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings

from backends.http import BlockingOpenAIClient, EndpointError, OpenAIEndpoint, endpoint_client
from flywheel.cache import shared_cache
from routing.classification.learned import LearnedModel

logger = logging.getLogger(__name__)

BATCH = 100  # texts per request when embedding examples
CACHE_KEY = "flywheel:embedding:{digest}"
CACHE_SECONDS = 30 * 24 * 3600
QUESTIONS_KEPT = 2048  # question vectors this process keeps
_FAILURES = (EndpointError, ValueError, KeyError, IndexError, TypeError)


@dataclass(frozen=True)
class EmbeddingsConfig:
    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_seconds: float = 1.0

    def endpoint(self) -> OpenAIEndpoint:
        return OpenAIEndpoint(self.base_url, self.api_key, name="embeddings endpoint")


def embeddings_config() -> EmbeddingsConfig | None:
    """The configured embeddings endpoint, or None when EMBEDDINGS_BASE_URL is not set."""
    if not settings.EMBEDDINGS_BASE_URL:
        return None
    return EmbeddingsConfig(
        base_url=settings.EMBEDDINGS_BASE_URL.rstrip("/"),
        model=settings.EMBEDDINGS_MODEL,
        api_key=settings.EMBEDDINGS_API_KEY,
        timeout_seconds=settings.EMBEDDINGS_TIMEOUT_SECONDS,
    )


def _body(config: EmbeddingsConfig, texts: Sequence[str]) -> dict[str, Any]:
    return {"model": config.model, "input": list(texts)}


def _vectors(answer: Any, count: int) -> list[list[float]]:
    """The vectors of an /embeddings answer, in input order; ValueError if malformed."""
    rows = sorted(answer["data"], key=lambda row: int(row["index"]))
    vectors = [[float(v) for v in row["embedding"]] for row in rows]
    if len(vectors) != count or len({len(v) for v in vectors}) != 1 or not vectors[0]:
        raise ValueError("the answer does not hold one vector per input")
    return vectors


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=float)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _key(config: EmbeddingsConfig, text: str) -> str:
    digest = hashlib.sha256(f"{config.base_url}\n{config.model}\n{text}".encode()).hexdigest()
    return CACHE_KEY.format(digest=digest)


def examples_embed(config: EmbeddingsConfig, texts: Sequence[str]) -> list[list[float]] | None:
    """The vectors of ``texts`` (the examples, at training time): from the shared cache,
    else asked for in batches of BATCH. None if any batch fails (logged)."""
    cache = shared_cache()
    keys = [_key(config, text) for text in texts]
    found = cache.get_many(keys)
    missing = [i for i, key in enumerate(keys) if key not in found]
    try:
        with BlockingOpenAIClient(config.endpoint()) as client:
            for start in range(0, len(missing), BATCH):
                batch = missing[start : start + BATCH]
                answer = client.post_json("/embeddings", _body(config, [texts[i] for i in batch]))
                vectors = _vectors(answer, len(batch))
                fresh = {keys[i]: vector for i, vector in zip(batch, vectors, strict=True)}
                cache.set_many(fresh, timeout=CACHE_SECONDS)
                found.update(fresh)
    except _FAILURES as err:
        logger.warning("Embeddings unavailable for training: %s", type(err).__name__)
        return None
    return [found[key] for key in keys]


class _Recent:
    """Question vectors this process asked for, the least recently used dropped first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector

    def put(self, key: str, vector: np.ndarray) -> None:
        with self._lock:
            self._vectors[key] = vector
            while len(self._vectors) > QUESTIONS_KEPT:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


_recent = _Recent()


async def question_vector(model: LearnedModel | None, question: str) -> np.ndarray | None:
    """``question``'s unit vector when embeddings are configured and ``model`` holds
    neighbours from the same embedding model; else, or on any failure, None."""
    config = embeddings_config()
    if model is None or model.neighbours is None or config is None:
        return None
    if model.neighbours.model != config.model:
        return None
    key = _key(config, question)
    vector = _recent.get(key)
    if vector is not None:
        return vector
    try:
        answer = await endpoint_client(config.endpoint()).post_json(
            "/embeddings", _body(config, [question]), deadline_seconds=config.timeout_seconds
        )
        (raw,) = _vectors(answer, 1)
    except _FAILURES as err:
        logger.warning("Embeddings unavailable for a question: %s", type(err).__name__)
        return None
    vector = _unit(raw)
    _recent.put(key, vector)
    return vector


def embeddings_forget() -> None:
    """Drop this process's question vectors (tests)."""
    _recent.clear()
