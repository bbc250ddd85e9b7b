"""What every app's pages share: an application error shown as a page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from flywheel.errors import ApplicationError

TITLES = {400: "Not valid", 403: "Not allowed", 404: "Not found"}


def error_page(request: HttpRequest, err: ApplicationError) -> HttpResponse:
    """An application error as a page in the one look, with its status."""
    context = {"error": err.as_dict()["error"], "title": TITLES.get(err.status_code, err.type)}
    return render(request, "pages/error.html", context, status=err.status_code)
