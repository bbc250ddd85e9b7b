"""Per-key rate limits, and a brake on failed authentication per client address.

Both are fixed windows on the wall clock, counted in the shared cache so that
every worker process sees the same counts: a key's requests in the current
window of its rate (its own ``rate_limit``, else settings.RATE_LIMIT), and an
address's failed authentications in the current window of
settings.AUTH_FAILURE_LIMIT. Past that many failures the address is refused
(429) on every request, valid key or not, until its window ends. A fixed
window lets up to twice a rate through around a window's edge: the price of
one counter per key, where a sliding window would cost a sorted set per key
and more work per request.

On Redis, a key far from its limit costs no round trip of its own: each
process counts its keys' requests itself and adds them to the shared counts
in one pipelined round trip at most every BATCH_SECONDS, for all its keys,
reading back the totals every process has counted. A key within EXACT_SHARE
(at least EXACT_MIN requests) of its limit is counted at once, one round
trip per request, as is any request arriving BATCH_SECONDS after the last
batch (then with the batch): a limit is exact unless the other processes
counted more than that margin in their last BATCH_SECONDS. The address
check is one Lua call too. Any other cache (``make run``'s file cache) gets
the same counts, one request at a time, through Django's cache API, which is
not atomic across processes: a race may lose a count, so the limit errs on
the generous side there.

If the cache cannot be reached, requests pass (the limiter fails open) and a
warning is logged at most once a minute: a cache outage must not lock every
tenant out. For a second after a failure the cache is not asked again, so an
outage costs no round trip per request.

The address is REMOTE_ADDR: the peer's, or, from a proxy named in
FLYWHEEL_TRUSTED_PROXIES, the client it forwarded for (flywheel/serving.py has
uvicorn believe X-Forwarded-For from those only). Behind a proxy not named
there, every client behind it shares the proxy's budget of failures.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import NoScriptError, RedisError

from flywheel.cache import shared_cache
from flywheel.env import as_rate
from flywheel.errors import RateLimitError
from flywheel.metrics import RATE_LIMITED

if TYPE_CHECKING:
    from flywheel.models import ApiKey

logger = logging.getLogger(__name__)

Rate = tuple[int, int]  # (requests, seconds)
PERIOD_NAMES = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
WARN_EVERY_SECONDS = 60.0
PAUSE_AFTER_FAILURE_SECONDS = 1.0
# A round trip per request was 18 % of a web process's CPU under load (py-spy, 32
# questions in flight); one per batch costs nothing measurable.
BATCH_SECONDS = 0.05
# Within this share of its limit, or EXACT_MIN requests, a key is counted exactly:
# a count kept here is unseen by other processes for up to BATCH_SECONDS, and the
# margin is what that may add (a burst of 10 % of a key's limit within 50 ms).
EXACT_SHARE = 0.1
EXACT_MIN = 50

# KEYS[1]: an address's failures, refused from ARGV[1] on (0: not checked).
# KEYS[2]: the counter to add ARGV[3] to, expiring after ARGV[2] seconds (0: none).
# Returns -1 for a refused address, else the counter's new value (0: none).
_HIT_SCRIPT = """
local refuse_from = tonumber(ARGV[1])
if refuse_from > 0 and tonumber(redis.call('GET', KEYS[1]) or '0') >= refuse_from then
  return -1
end
local ttl = tonumber(ARGV[2])
if ttl == 0 then
  return 0
end
local count = redis.call('INCRBY', KEYS[2], ARGV[3])
if count == tonumber(ARGV[3]) then
  redis.call('EXPIRE', KEYS[2], ttl)
end
return count
"""
REFUSED = -1


class _RedisCounts:
    """The hit, as one Lua call on the cache's own Redis client.

    EVALSHA is sent directly: redis-py's Script wrapper adds about 20 us a call
    here (0.18 ms against 0.16 ms, median of 20,000; a bare GET takes 0.14 ms).
    """

    def __init__(self, cache: RedisCache) -> None:
        self._make_key = cache.make_key  # the cache's prefix: per checkout, cleared by tests
        self._client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        self._sha = hashlib.sha1(_HIT_SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis's name

    batches = True

    def hit(self, guard: str, refuse_from: int, counter: str, ttl: int, by: int = 1) -> int:
        keys = (self._make_key(guard), self._make_key(counter))
        try:
            return int(self._client.evalsha(self._sha, 2, *keys, refuse_from, ttl, by))
        except NoScriptError:  # a Redis that has not seen the script yet (or was restarted)
            self._sha = self._client.script_load(_HIT_SCRIPT)
            return int(self._client.evalsha(self._sha, 2, *keys, refuse_from, ttl, by))

    def add(self, counts: Mapping[str, tuple[int, int]]) -> dict[str, int]:
        """Add each counter's ``(amount, ttl)`` in one pipelined round trip; the totals."""
        try:
            totals = self._pipelined(counts)
        except NoScriptError:  # none of them ran: the script is missing for all
            self._sha = self._client.script_load(_HIT_SCRIPT)
            totals = self._pipelined(counts)
        return {counter: int(total) for counter, total in zip(counts, totals, strict=True)}

    def _pipelined(self, counts: Mapping[str, tuple[int, int]]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for counter, (amount, ttl) in counts.items():
            key = self._make_key(counter)
            pipe.evalsha(self._sha, 2, key, key, 0, ttl, amount)
        return list(pipe.execute())


class _CacheCounts:
    """The hit through Django's cache API: any cache, but not atomic across processes."""

    batches = False

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def hit(self, guard: str, refuse_from: int, counter: str, ttl: int, by: int = 1) -> int:
        if refuse_from and (self._cache.get(guard) or 0) >= refuse_from:
            return REFUSED
        if not ttl:
            return 0
        self._cache.add(counter, 0, ttl)
        try:
            return int(self._cache.incr(counter, by))
        except ValueError:  # expired between add and incr: a new window
            self._cache.set(counter, by, ttl)
            return by

    def add(self, counts: Mapping[str, tuple[int, int]]) -> dict[str, int]:
        return {c: self.hit(c, 0, c, ttl, amount) for c, (amount, ttl) in counts.items()}


def _window(rate: Rate, now: float) -> tuple[int, int]:
    """The current window's number and the seconds until it ends (at least 1)."""
    seconds = rate[1]
    index = int(now // seconds)
    return index, max(1, math.ceil((index + 1) * seconds - now))


def _failures_key(address: str, rate: Rate, now: float) -> str:
    return f"flywheel:ratelimit:auth:{rate[1]}:{_window(rate, now)[0]}:{address}"


def _requests_key(key_id: int | str, rate: Rate, now: float) -> str:
    return f"flywheel:ratelimit:key:{key_id}:{rate[1]}:{_window(rate, now)[0]}"


def _address_refused(rate: Rate, now: float) -> RateLimitError:
    RATE_LIMITED.labels("auth-failures").inc()
    return RateLimitError(
        "Too many failed authentications from this address; try again later.",
        retry_after=_window(rate, now)[1],
    )


def describe(rate: Rate) -> str:
    """``(600, 60)`` as ``600/minute``: the form the admin and the environment take."""
    count, seconds = rate
    return f"{count}/{PERIOD_NAMES[seconds]}" if seconds in PERIOD_NAMES else f"{count}/{seconds}s"


class RateLimiter:
    """The counts of one cache. Each method raises RateLimitError when a limit is
    reached and passes (with a warning now and then) when the cache fails."""

    def __init__(self, cache: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.cache = cache
        self._clock = clock  # the wall clock: windows are aligned to it across processes
        self._counts = _RedisCounts(cache) if isinstance(cache, RedisCache) else _CacheCounts(cache)
        self._lock = threading.Lock()
        self._paused_until = -math.inf
        self._warned_at = -math.inf
        # Batched counting: counter -> [the total the cache last returned, counted here
        # since], and when its window ends (the wall clock).
        self._tallies: dict[str, list[int]] = {}
        self._ends: dict[str, float] = {}
        self._sent_at = -math.inf  # monotonic time of the last batch

    def admit(self, *, key_id: int | str, rate: Rate | None, who: str = "This API key") -> None:
        """Count a request of a key (an API key's id, or another counter's name such as
        ``user-7``); refuse it past ``rate``, saying ``who`` is over it.

        The error carries ``excess``: how many requests over the limit this one is.
        """
        if rate is None:
            return
        now = self._clock()
        counter = _requests_key(key_id, rate, now)
        hit = self._count(counter, rate, now)
        if hit is not None and hit > rate[0]:
            err = RateLimitError(
                f"{who} is over its rate limit of {describe(rate)}.",
                retry_after=_window(rate, now)[1],
                details={"limit": describe(rate)},
            )
            err.excess = hit - rate[0]
            RATE_LIMITED.labels("key").inc()
            raise err

    def admit_address(self, *, address: str) -> None:
        """Refuse an address that has failed to authenticate too often (counts nothing)."""
        blocking = settings.AUTH_FAILURE_LIMIT
        if blocking is None:
            return
        now = self._clock()
        guard = _failures_key(address, blocking, now)
        if self._hit(guard, blocking[0], guard, 0) == REFUSED:
            raise _address_refused(blocking, now)

    def note_failure(self, *, address: str) -> None:
        """Count a failed authentication from ``address``."""
        blocking = settings.AUTH_FAILURE_LIMIT
        if blocking is not None:
            guard = _failures_key(address, blocking, self._clock())
            self._hit(guard, 0, guard, blocking[1])

    def _count(self, counter: str, rate: Rate, now: float) -> int | None:
        """The key's count with this request (None: the cache failed).

        Far from the limit, with a batch sent less than BATCH_SECONDS ago, the
        request is counted here; otherwise a batch goes now, this request in it,
        and the count is the total the cache returns.
        """
        ttl = _window(rate, now)[1]
        if not self._counts.batches:
            return self._hit(counter, 0, counter, ttl)
        margin = max(EXACT_MIN, math.ceil(rate[0] * EXACT_SHARE))
        with self._lock:
            tally = self._tallies.setdefault(counter, [0, 0])
            self._ends[counter] = now + ttl
            tally[1] += 1
            estimate = tally[0] + tally[1]
            due = time.monotonic() - self._sent_at >= BATCH_SECONDS
            if estimate <= rate[0] - margin and not due:
                return estimate
        totals = self._send_batch()
        if totals is None:
            return None
        with self._lock:  # sent by another thread's batch meanwhile: the estimate
            return totals.get(counter, tally[0] + tally[1])

    def _send_batch(self) -> dict[str, int] | None:
        """Add what each counter counted here to the shared counts in one round trip and
        keep the totals every process has counted; None when the cache failed (what was
        counted here is then lost: the limiter fails open)."""
        now = self._clock()
        with self._lock:
            self._sent_at = time.monotonic()
            batch = {c: (t[1], self._ttl(c, now)) for c, t in self._tallies.items() if t[1]}
            for tally in self._tallies.values():
                tally[1] = 0
            for ended in [c for c, end in self._ends.items() if end <= now]:
                self._ends.pop(ended)
                self._tallies.pop(ended, None)
        if not batch:
            return {}
        if time.monotonic() < self._paused_until:
            return None
        try:
            totals = self._counts.add(batch)
        except (RedisError, OSError) as err:
            self._failed(err)
            return None
        with self._lock:
            for counter, total in totals.items():
                if counter in self._tallies:
                    self._tallies[counter][0] = max(self._tallies[counter][0], total)
        return totals

    def _ttl(self, counter: str, now: float) -> int:
        return max(1, math.ceil(self._ends.get(counter, now + 1) - now))

    def flush(self) -> None:
        """Send what was counted here now (tests; the next request past the batch
        interval does it otherwise)."""
        self._send_batch()

    def _hit(self, guard: str, refuse_from: int, counter: str, ttl: int, by: int = 1) -> int | None:
        """The counts' answer, or None when the cache failed (fail open)."""
        if time.monotonic() < self._paused_until:
            return None
        try:
            return self._counts.hit(guard, refuse_from, counter, ttl, by)
        except (RedisError, OSError) as err:
            self._failed(err)
            return None

    def _failed(self, err: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            self._paused_until = now + PAUSE_AFTER_FAILURE_SECONDS
            if now - self._warned_at < WARN_EVERY_SECONDS:
                return
            self._warned_at = now
        logger.warning(
            "Rate limits are off: the cache does not answer (%s: %s); requests pass "
            "unlimited until it does (this warning repeats at most every %.0f s).",
            type(err).__name__,
            err,
            WARN_EVERY_SECONDS,
        )


_current: RateLimiter | None = None


def limiter() -> RateLimiter:
    """The limiter over this process's shared cache (a new one if the cache changed)."""
    global _current
    cache = shared_cache().inner  # the limiter handles a failing cache itself (fails open)
    if _current is None or _current.cache is not cache:
        _current = RateLimiter(cache)
    return _current


@functools.lru_cache(maxsize=1024)
def _own_rate(raw: str) -> tuple[bool, Rate | None]:
    """A key's own limit as (valid, rate); parsed once per distinct text."""
    try:
        return True, as_rate(raw)
    except ValueError:
        logger.warning("An API key has an invalid rate limit %r; the default applies.", raw)
        return False, None


def api_key_rate(api_key: ApiKey) -> Rate | None:
    """The rate that applies to ``api_key``: its own if set (None: off), else the setting."""
    if api_key.rate_limit:
        valid, own = _own_rate(api_key.rate_limit)
        if valid:
            return own
    default: Rate | None = settings.RATE_LIMIT
    return default


def client_address(meta: Mapping[str, Any]) -> str:
    """The address failures are counted against: REMOTE_ADDR (the peer's, or the client a
    trusted proxy forwarded for: flywheel/serving.py).

    An IPv6 client usually holds a whole /64, so that is what counts.
    """
    address = str(meta.get("REMOTE_ADDR") or "unknown")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return address


def api_key_admit(*, api_key: ApiKey) -> None:
    """Count a request of ``api_key``. Raises RateLimitError (with retry_after) when
    the key is over its rate. One cache round trip."""
    limiter().admit(key_id=api_key.pk, rate=api_key_rate(api_key))


def person_admit(*, user: Any) -> None:
    """Count a question a logged-in person asks on the chat page, at the server's
    FLYWHEEL_RATE_LIMIT (as an API key without a limit of its own). Raises
    RateLimitError."""
    limiter().admit(key_id=f"user-{user.pk}", rate=settings.RATE_LIMIT, who="Your account")


def address_admit(*, address: str) -> None:
    """Raises RateLimitError when ``address`` has failed to authenticate too often."""
    limiter().admit_address(address=address)


def address_failure_note(*, address: str) -> None:
    """Count a failed authentication from ``address``."""
    limiter().note_failure(address=address)
