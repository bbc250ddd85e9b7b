"""ASGI entry point: `uvicorn flywheel.asgi:application`."""

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")

application = get_asgi_application()
if settings.SERVE_STATIC:
    # The admin's CSS and JS, served by the app itself so that a single
    # process needs no web server in front; turn off behind a proxy that serves them.
    application = ASGIStaticFilesHandler(application)
