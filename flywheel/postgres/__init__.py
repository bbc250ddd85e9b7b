"""Django's PostgreSQL backend, with the outage detector (flywheel.outage) on connecting."""
