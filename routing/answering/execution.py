"""Running a question along the fallback chain, one candidate after another.

Every attempt, failed ones included, becomes an Attempt (and later a
PerformanceRecord). Whatever ends an attempt moves on to the next candidate:
a backend's typed error, or anything that fails on Flywheel's side of the
call (a backend setting the HTTP client cannot send, such as an API key
holding a line break, or a bug in one adapter). The latter is logged with its
traceback and recorded as a ClientError; its text never reaches the client.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backends.adapters import get_adapter
from backends.adapters.base import BackendConfig, Exchange, ExecutionResult, StreamEvent, Usage
from backends.errors import BackendError, BackendNotFoundError
from backends.http import ms_since
from backends.models import Backend
from backends.services import backend_config
from flywheel.asyncdb import db
from flywheel.singleflight import SingleFlight
from routing.selection.attempt import Attempt, BudgetExceededError, caller_caused
from routing.selection.scoring import BackendEntry, Candidate

logger = logging.getLogger(__name__)

# Credentials are read from the database, not from the shared cache; each
# process keeps them per backend until the backend's version changes.
_configs: dict[int, tuple[str, BackendConfig]] = {}
_config_loads: SingleFlight[BackendConfig] = SingleFlight()


def forget_configs() -> None:
    """Drop the remembered credentials (tests)."""
    _configs.clear()


def _load_config(backend: BackendEntry) -> BackendConfig:
    try:
        return backend_config(Backend.objects.get(pk=backend.id))
    except Backend.DoesNotExist as err:  # deleted since the routing state was published
        raise BackendNotFoundError(
            f"Backend {backend.name!r} no longer exists.", backend=backend.name
        ) from err


async def config_for(backend: BackendEntry) -> BackendConfig:
    cached = _configs.get(backend.id)
    if cached is not None and cached[0] == backend.version:
        return cached[1]
    # Queries that find the memo cold together (a burst to a backend) share one read.
    config = await _config_loads.do(
        (backend.id, backend.version), lambda: db(_load_config)(backend)
    )
    _configs[backend.id] = (backend.version, config)
    return config


@dataclass(frozen=True)
class ChainResult:
    result: ExecutionResult | None
    winner: Candidate | None
    attempts: tuple[Attempt, ...]
    execute_ms: float


HistoryFor = Callable[[Candidate], Sequence[Exchange]]


class BackendClientError(BackendError):
    """Flywheel's side of a call to a backend failed (not the backend, not the caller)."""

    type = "ClientError"


def _failure(candidate: Candidate, err: Exception) -> BackendError:
    """What ended an attempt, as a typed backend error: ``err`` itself if it is one;
    otherwise a ClientError, the unexpected error logged with its traceback."""
    if isinstance(err, BackendError):
        return err
    logger.exception(
        "Attempt on backend %s (flow %s) failed inside Flywheel: %s",
        candidate.backend.name,
        candidate.flow.name,
        type(err).__name__,
    )
    return BackendClientError(
        "Flywheel could not complete the call to this backend; the error was logged.",
        backend=candidate.backend.name,
    )


def _attempt(
    candidate: Candidate,
    started: float,
    error: BackendError | None = None,
    usage: Usage | None = None,
) -> Attempt:
    return Attempt(
        backend_id=candidate.backend.id,
        backend=candidate.backend.name,
        flow_id=candidate.flow.id,
        flow=candidate.flow.name,
        ok=error is None,
        latency_ms=ms_since(started),
        error_type=error.type if error else "",
        error=error.message[:500] if error else "",
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        total_tokens=usage.total_tokens if usage else None,
        cost=usage.cost if usage else None,
        backend_owner=candidate.backend.tenant_id,
        caller_fault=error is not None and caller_caused(error),
    )


def _remaining(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (a time.perf_counter() value); None: no deadline."""
    return None if deadline is None else deadline - time.perf_counter()


def _out_of_time(candidate: Candidate, budget: float | None) -> BudgetExceededError:
    return BudgetExceededError(
        f"No answer within what remained of the query's time budget ({budget or 0:.1f} s).",
        backend=candidate.backend.name,
    )


async def run_chain(
    candidates: Sequence[Candidate],
    question: str,
    *,
    session_id: str,
    parameters: dict[str, Any],
    history_for: HistoryFor,
    deadline: float | None = None,
) -> ChainResult:
    """Ask each candidate in turn until one answers, each within what remains before
    ``deadline`` (a time.perf_counter() value): none starts once it has passed."""
    attempts: list[Attempt] = []
    chain_started = time.perf_counter()
    for candidate in candidates:
        budget = _remaining(deadline)
        if budget is not None and budget <= 0:
            break
        started = time.perf_counter()
        limit = asyncio.timeout(budget)
        try:
            adapter = get_adapter(await config_for(candidate.backend))
            async with limit:
                result = await adapter.execute_flow(
                    candidate.flow.external_id,
                    question,
                    session_id=session_id,
                    parameters=parameters,
                    history=history_for(candidate),
                )
        except Exception as err:  # the backend's fault, ours or the budget's: try the next
            failure = _out_of_time(candidate, budget) if limit.expired() else None
            attempts.append(_attempt(candidate, started, failure or _failure(candidate, err)))
            continue
        attempts.append(_attempt(candidate, started, usage=result.usage))
        return ChainResult(result, candidate, tuple(attempts), ms_since(chain_started))
    return ChainResult(None, None, tuple(attempts), ms_since(chain_started))


@dataclass
class StreamProgress:
    """What a streamed chain has done so far (read once the stream ends)."""

    attempts: list[Attempt]
    winner: Candidate | None = None
    result: ExecutionResult | None = None
    execute_ms: float = 0.0


async def stream_chain(
    candidates: Sequence[Candidate],
    question: str,
    *,
    session_id: str,
    parameters: dict[str, Any],
    history_for: HistoryFor,
    progress: StreamProgress,
    deadline: float | None = None,
) -> AsyncIterator[str]:
    """Yield answer text chunks, falling back only while nothing has been sent; each
    attempt within what remains before ``deadline``, as run_chain.

    Once a chunk has gone out, a failure ends the stream with the error:
    mixing two backends' answers would be worse.
    """
    chain_started = time.perf_counter()
    try:
        for candidate in candidates:
            budget = _remaining(deadline)
            if budget is not None and budget <= 0:
                break
            started = time.perf_counter()
            sent = False
            end: StreamEvent | None = None
            # The timeout cancels this generator's consumer task (the stream's producer),
            # which only hands chunks to an unbounded queue between them: the cancellation
            # lands inside this block, where it becomes a TimeoutError.
            limit = asyncio.timeout(budget)
            try:
                adapter = get_adapter(await config_for(candidate.backend))
                async with limit:
                    async for event in adapter.stream_flow(
                        candidate.flow.external_id,
                        question,
                        session_id=session_id,
                        parameters=parameters,
                        history=history_for(candidate),
                    ):
                        if event.type == "chunk" and event.text:
                            sent = True
                            yield event.text
                        elif event.type == "end":
                            end = event
            except Exception as err:  # the backend's fault or ours: the next one may answer
                failure = (
                    _out_of_time(candidate, budget) if limit.expired() else _failure(candidate, err)
                )
                progress.attempts.append(_attempt(candidate, started, failure))
                if not sent:
                    continue
                if failure is err:
                    raise
                raise failure from err
            usage = end.usage if end else None
            progress.attempts.append(_attempt(candidate, started, usage=usage))
            progress.winner = candidate
            text = end.text if end else ""
            progress.result = ExecutionResult(text, end.session_id if end else "", {}, usage=usage)
            return
    finally:
        progress.execute_ms = ms_since(chain_started)
