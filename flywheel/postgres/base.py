"""Django's PostgreSQL backend, told of outages (flywheel.outage).

Every connection (a checkout from the pool included) passes here: while the
database is known down, one a PROBE_SECONDS tries it and the rest fail at once,
as the driver's own OperationalError, instead of each waiting the pool's
timeout. Only what needs a connection is refused: a request the cache can
answer does not notice the outage.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool.base import AttemptWithBackoff

from flywheel.outage import database_outage

# The pool tries a lost database again after doubling waits (1, 2, 4 ... s): after a
# minute's outage it reconnected up to a minute after the database was back, and every
# write waited as long. Every second instead: a refused connection costs little.
AttemptWithBackoff.DELAY_BACKOFF = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        database_outage.admit()
        try:
            connection = super().get_new_connection(conn_params)
        except psycopg.OperationalError as err:  # PoolTimeout included
            database_outage.failed(err)
            raise
        except BaseException:
            database_outage.inconclusive()
            raise
        database_outage.answered()
        return connection
