"""Flywheel: the project package and composition root."""

from flywheel.celery import app as celery_app

__all__ = ["celery_app"]
