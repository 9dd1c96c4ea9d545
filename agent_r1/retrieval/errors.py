"""Errors a search backend raises when its service, not the query, is at fault."""

from __future__ import annotations


class ServiceUnavailableError(RuntimeError):
    """The service behind a retriever (e.g. the Elasticsearch server) is down after the client's own
    retries. Unlike a bad query this is not the model's doing, so the tool runner lets it through:
    the run stops with this message (its last checkpoint intact, `--resume` continues) instead of
    training on error observations."""
