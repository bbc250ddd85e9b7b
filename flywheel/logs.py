"""Log lines: readable by default, JSON with FLYWHEEL_LOG_FORMAT=json; both carry the
request id of the query they belong to.

The query service sets ``request_id`` (a context variable) when a query starts, so
every line logged while answering it, in its task and the tasks it starts, names
it; lines outside a query show "-". The decision writer logs one line per
decision, naming its request id explicitly (it runs on a thread of its own).
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id: ContextVar[str] = ContextVar("flywheel_request_id", default="-")


class RequestIdFilter(logging.Filter):
    """Give each record the request id of the query it was logged in (unless it has one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, then the
    record's ``fields`` (structured values a line carries, e.g. a decision's)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
