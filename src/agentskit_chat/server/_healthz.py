"""A ``/healthz`` endpoint that runs the host's readiness checks.

Every check runs concurrently under one timeout. The answer is ``200 {"status":"ok"}`` when all
of them pass, or ``503`` naming the checks that failed, and nothing else: an exception's text
(which may hold a connection URL or a password) never reaches the response.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias

import anyio
import orjson

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol._types import is_safe_id

from ._asgi import Receive, Scope, Send, handle_non_http, send_response
from ._errors import method_allowed

__all__ = ["HealthCheck", "HealthzApp", "create_healthz_app"]

#: A readiness check: passes unless it raises, returns ``False`` or outlives the timeout.
#: It may be a coroutine function (preferred) or a quick synchronous function.
HealthCheck: TypeAlias = Callable[[], Awaitable[object] | object]

_JSON: Final = (b"content-type", b"application/json")


class HealthzApp:
    """Runs its checks on every ``GET`` (or ``HEAD``) and reports the result as JSON.

    Built by :func:`create_healthz_app`. It answers every path it is given, so route it to
    ``/healthz``.
    """

    def __init__(self, checks: Mapping[str, HealthCheck], timeout_seconds: float) -> None:
        self._checks = dict(checks)
        self._timeout = timeout_seconds

    async def failing(self) -> tuple[str, ...]:
        """Run every check concurrently; the names of those that failed, in declared order."""
        passed: set[str] = set()

        async def run(name: str, check: HealthCheck) -> None:
            with anyio.move_on_after(self._timeout):
                try:
                    result = check()
                    if inspect.isawaitable(result):
                        result = await result
                except Exception:
                    # The reason stays private: only the check's name is reported.
                    return
                if result is not False:
                    passed.add(name)

        async with anyio.create_task_group() as group:
            for name, check in self._checks.items():
                group.start_soon(run, name, check)
        return tuple(name for name in self._checks if name not in passed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection."""
        if await handle_non_http(scope, receive, send):
            return
        if not await method_allowed(scope, send):
            return
        failing = await self.failing()
        if failing:
            body = orjson.dumps({"status": "unavailable", "failing": list(failing)})
            await send_response(scope, send, 503, [_JSON], body)
        else:
            await send_response(scope, send, 200, [_JSON], b'{"status":"ok"}')


def create_healthz_app(
    checks: Mapping[str, HealthCheck] | None = None, *, timeout_seconds: float = 5.0
) -> HealthzApp:
    """Build the ``/healthz`` endpoint.

    With no checks it answers 200 as long as the process serves requests (liveness). With
    checks, it is a readiness probe: ``503 {"status":"unavailable","failing":["redis"]}``
    when a check raises, returns ``False`` or takes longer than ``timeout_seconds``.

    Args:
        checks: Check functions by name. Names are reported as given, so they must be safe
            identifiers (``postgres``, ``redis``, ``index``).
        timeout_seconds: How long the checks may take together.

    Raises:
        ConfigurationError: a name is not a safe identifier, a check is not callable, or the
            timeout is not a positive number.

    Example:
        >>> async def redis_ready() -> bool:
        ...     return True
        >>> app = create_healthz_app({"redis": redis_ready}, timeout_seconds=2)
    """
    checks = {} if checks is None else dict(checks)
    for name, check in checks.items():
        if not is_safe_id(name):
            raise ConfigurationError("A health check name must be a safe identifier.")
        if not callable(check):
            raise ConfigurationError("A health check must be callable.")
    if (
        type(timeout_seconds) not in (int, float)
        or not math.isfinite(timeout_seconds)
        or timeout_seconds <= 0
    ):
        raise ConfigurationError("The health check timeout must be a positive number.")
    return HealthzApp(checks, float(timeout_seconds))
