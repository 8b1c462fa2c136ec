"""A Prometheus scrape endpoint as a plain ASGI app.

``prometheus_client`` ships its own ASGI app, but mounted with Starlette's ``Mount("/metrics")``
a scrape of ``/metrics`` is answered with a 307 to ``/metrics/``, which some scrapers refuse to
follow. This endpoint is meant for a ``Route("/metrics", ...)``: it answers exactly the path it is
routed to. The registry is rendered in a worker thread, so a large registry never stalls the
event loop, and the exposition format follows the scraper's ``Accept`` header (the Prometheus
text format unless OpenMetrics is asked for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread

from ._asgi import Receive, Scope, Send, handle_non_http, send_response
from ._errors import method_allowed

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

__all__ = ["PrometheusMetricsApp", "create_prometheus_metrics_app"]


def _accept(scope: Scope) -> str:
    values = [value for key, value in scope.get("headers", ()) if key.lower() == b"accept"]
    return ",".join(value.decode("latin-1") for value in values)


class PrometheusMetricsApp:
    """Serves a Prometheus registry on ``GET`` (and ``HEAD``); other methods get a 405.

    Built by :func:`create_prometheus_metrics_app`. It answers every path it is given, so
    route it to the one path scrapers use.
    """

    def __init__(self, registry: Collector) -> None:
        self._registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if await handle_non_http(scope, receive, send):
            return
        if not await method_allowed(scope, send):
            return
        from prometheus_client.exposition import choose_encoder  # noqa: PLC0415

        encoder, content_type = choose_encoder(_accept(scope))
        body = await anyio.to_thread.run_sync(encoder, self._registry)
        await send_response(scope, send, 200, [(b"content-type", content_type.encode())], body)


def create_prometheus_metrics_app(registry: Collector | None = None) -> PrometheusMetricsApp:
    """Build the ``/metrics`` endpoint over ``registry``.

    To expose the Ask service's OpenTelemetry metrics, give the meter provider a
    ``PrometheusMetricReader(registry=...)`` on the same registry (see ``docs/operations.md``).

    Args:
        registry: The registry to serve; defaults to ``prometheus_client.REGISTRY``, where
            ``PrometheusMetricReader()`` registers by default.

    Raises:
        ImportError: the ``server`` extra (``prometheus-client``) is not installed.

    Example:
        >>> from starlette.applications import Starlette  # doctest: +SKIP
        >>> from starlette.routing import Route  # doctest: +SKIP
        >>> metrics = create_prometheus_metrics_app()  # doctest: +SKIP
        >>> app = Starlette(routes=[Route("/metrics", metrics)])  # doctest: +SKIP
    """
    try:
        from prometheus_client import REGISTRY  # noqa: PLC0415 - the server extra is optional
    except ImportError as exc:
        raise ImportError(
            "The Prometheus endpoint needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc
    return PrometheusMetricsApp(REGISTRY if registry is None else registry)
