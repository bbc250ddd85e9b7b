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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from backends.adapters import get_adapter
from backends.adapters.base import BackendConfig, Exchange, ExecutionResult, StreamEvent, Usage
from backends.errors import BackendError, BackendNotFoundError
from backends.http import ms_since
from backends.models import Backend
from backends.services import backend_config
from flywheel.asyncdb import db
from flywheel.singleflight import SingleFlight
from routing.answering.deadlines import attempt_deadline, cut_short, remaining
from routing.selection.attempt import CANCELLED, Attempt, caller_caused
from routing.selection.learning import book
from routing.selection.scoring import BackendEntry, Candidate, PolicyValues

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


def _failure(candidate: Candidate, err: BaseException) -> BackendError:
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
        retried=candidate.trial and candidate.estimate.retry_due,
        ended_at=time.time(),
    )


class _Learning:
    """An attempt in flight for routing's book (routing.selection.learning), then what
    it showed, if it says something of the backend."""

    def __init__(self, candidate: Candidate, intent: str, policy: PolicyValues) -> None:
        self.key = (candidate.backend.id, candidate.flow.id, intent)
        self.policy = policy
        self.token = book.started(self.key, time.time())

    def end(self) -> None:
        """No longer in flight (however it ended: cancelled too)."""
        book.finished(self.key, self.token)

    def done(self, attempt: Attempt) -> Attempt:
        self.end()
        if attempt.measured:
            book.observe(
                self.key,
                attempt.ended_at or time.time(),  # the time its record keeps
                attempt.ok,
                attempt.latency_ms / 1000,
                attempt.total_tokens,
                half_life=self.policy.half_life_seconds,
                attempts_half_life=self.policy.half_life_attempts,
            )
        return attempt


async def _ask(
    candidate: Candidate,
    question: str,
    *,
    session_id: str,
    parameters: dict[str, Any],
    history: Sequence[Exchange],
    budget: float | None,
    fallback_waits: bool,
) -> ExecutionResult:
    """One candidate's answer within its deadline (attempt_deadline); any failure as a
    typed backend error (the budget's own when the query's budget ran out)."""
    limit: asyncio.Timeout | None = None
    seconds = budget
    try:
        config = await config_for(candidate.backend)
        seconds = attempt_deadline(config.timeout_seconds, budget, fallback_waits)
        adapter = get_adapter(config)
        async with asyncio.timeout(seconds) as limit:
            return await adapter.execute_flow(
                candidate.flow.external_id,
                question,
                session_id=session_id,
                parameters=adapter.tuned(parameters, candidate.flow.tunable),
                history=history,
            )
    except Exception as err:  # the backend's fault, ours or the budget's
        if limit is not None and limit.expired():
            raise cut_short(candidate.backend.name, seconds, budget) from err
        raise _failure(candidate, err) from err


@dataclass
class _Running:
    candidate: Candidate
    learning: _Learning
    started: float
    hedged: bool  # started while the attempt before it still ran

    def ended(self, error: BackendError | None, usage: Usage | None = None) -> Attempt:
        attempt = _attempt(self.candidate, self.started, error, usage)
        return self.learning.done(replace(attempt, hedged=self.hedged))

    def cancelled(self) -> Attempt:
        self.learning.end()
        attempt = _attempt(self.candidate, self.started)
        return replace(
            attempt,
            ok=False,
            error_type=CANCELLED,
            error="Stopped: the other hedged attempt answered first.",
            hedged=self.hedged,
        )


async def run_chain(
    candidates: Sequence[Candidate],
    question: str,
    *,
    intent: str,
    policy: PolicyValues,
    session_id: str,
    parameters: dict[str, Any],
    history_for: HistoryFor,
    deadline: float | None = None,
) -> ChainResult:
    """Ask each candidate in turn until one answers, each within what remains before
    ``deadline`` (a time.perf_counter() value): none starts once it has passed.

    With the policy's ``hedging`` on, the next candidate also starts when the one
    running alone passes its usual latency (Estimate.usual_seconds): the first answer
    wins and the other attempt is cancelled; both are recorded.
    """
    attempts: list[tuple[float, Attempt]] = []  # by when each started: the chain's order
    chain_started = time.perf_counter()
    waiting = list(candidates)
    waiting.reverse()  # popped from the end: in order
    running: dict[asyncio.Task[ExecutionResult], _Running] = {}

    def start(hedged: bool = False) -> None:
        budget = remaining(deadline)
        if not waiting or (budget is not None and budget <= 0):
            return
        candidate = waiting.pop()
        task = asyncio.ensure_future(
            _ask(
                candidate,
                question,
                session_id=session_id,
                parameters=parameters,
                history=history_for(candidate),
                budget=budget,
                fallback_waits=bool(waiting),
            )
        )
        learning = _Learning(candidate, intent, policy)
        running[task] = _Running(candidate, learning, time.perf_counter(), hedged)

    start()
    try:
        while running:
            hedge_in = _hedge_in(running, policy) if waiting else None
            done, _ = await asyncio.wait(
                running, timeout=hedge_in, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:  # the one running passed its usual latency
                start(hedged=True)
                continue
            for task in sorted(done, key=lambda t: running[t].started):
                now = running.pop(task)
                error = task.exception()
                if error is None:
                    result = task.result()
                    attempts.append((now.started, now.ended(None, result.usage)))
                    attempts.extend(await _cancel(running))
                    chain = tuple(a for _, a in sorted(attempts, key=lambda a: a[0]))
                    return ChainResult(result, now.candidate, chain, ms_since(chain_started))
                failure = _failure(now.candidate, error)  # typed by _ask already
                attempts.append((now.started, now.ended(failure)))
            if not running:
                start()
    finally:
        await _cancel(running)  # cancelled ourselves: none of them outlives the query
    chain = tuple(a for _, a in sorted(attempts, key=lambda a: a[0]))
    return ChainResult(None, None, chain, ms_since(chain_started))


def _hedge_in(
    running: Mapping[asyncio.Task[ExecutionResult], _Running], policy: PolicyValues
) -> float | None:
    """Seconds until the next candidate starts beside the one running: None while hedging
    is off, or two run already."""
    if not policy.hedging or len(running) != 1:
        return None
    (now,) = running.values()
    return max(now.started + now.candidate.estimate.usual_seconds - time.perf_counter(), 0.0)


async def _cancel(
    running: dict[asyncio.Task[ExecutionResult], _Running],
) -> list[tuple[float, Attempt]]:
    """Stop the attempts still running (a hedge lost, or the query itself was cancelled),
    each recorded as cancelled."""
    stopped = []
    for task, each in running.items():
        task.cancel()
        stopped.append((each.started, each.cancelled()))
    if running:
        await asyncio.gather(*running, return_exceptions=True)
    running.clear()
    return stopped


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
    intent: str,
    policy: PolicyValues,
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
            budget = remaining(deadline)
            if budget is not None and budget <= 0:
                break
            started = time.perf_counter()
            sent = False
            end: StreamEvent | None = None
            # The timeout cancels this generator's consumer task (the stream's producer),
            # which only hands chunks to an unbounded queue between them: the cancellation
            # lands inside this block, where it becomes a TimeoutError. Until its first
            # chunk an attempt has its deadline (attempt_deadline); from then on, with no
            # fallback left, what remains of the query's budget.
            limit: asyncio.Timeout | None = None
            seconds = budget
            learning = _Learning(candidate, intent, policy)
            try:
                config = await config_for(candidate.backend)
                waits = candidate is not candidates[-1]
                seconds = attempt_deadline(config.timeout_seconds, budget, waits)
                budget_ends = None if budget is None else asyncio.get_running_loop().time() + budget
                adapter = get_adapter(config)
                async with asyncio.timeout(seconds) as limit:
                    async for event in adapter.stream_flow(
                        candidate.flow.external_id,
                        question,
                        session_id=session_id,
                        parameters=adapter.tuned(parameters, candidate.flow.tunable),
                        history=history_for(candidate),
                    ):
                        if event.type == "chunk" and event.text:
                            if not sent:
                                limit.reschedule(budget_ends)
                            sent = True
                            yield event.text
                        elif event.type == "end":
                            end = event
            except Exception as err:  # the backend's fault or ours: the next one may answer
                failure = _failure(candidate, err)
                if limit is not None and limit.expired():  # once a chunk came: the budget's
                    failure = cut_short(candidate.backend.name, budget if sent else seconds, budget)
                progress.attempts.append(learning.done(_attempt(candidate, started, failure)))
                if not sent:
                    continue
                if failure is err:
                    raise
                raise failure from err
            finally:
                learning.end()
            usage = end.usage if end else None
            progress.attempts.append(learning.done(_attempt(candidate, started, usage=usage)))
            progress.winner = candidate
            text = end.text if end else ""
            progress.result = ExecutionResult(text, end.session_id if end else "", {}, usage=usage)
            return
    finally:
        progress.execute_ms = ms_since(chain_started)
