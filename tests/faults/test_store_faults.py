"""A store stopped and restarted under load, on SQLite, PostgreSQL and Redis (issue 24).

A real uvicorn server (:func:`~agentskit_chat.server.create_app`) serves a chat whose sessions
and messages live in a private store (:mod:`tests.faults.conftest`); a few clients do turns,
start conversations and read snapshots throughout. Mid-load the store goes away, and comes back.

- **While it is away:** every client gets an answer, never a hang, and every answer is either a
  stored turn or a typed error (a JSON body with a code, or a stream that ends on one);
  ``/healthz`` answers 503; the server logs the failures (under ``agentskit_chat.``), with no
  conversation id, question or answer in any record; ``/metrics`` counts the store errors, and
  exactly the turns the clients saw complete.
- **Once it is back:** full service within 5 s — ``/healthz`` 200, a new conversation, and a
  follow-up in every conversation a client was in (so no lease is left holding a session).
- **Nothing committed is lost:** every turn a client saw complete is in the store afterwards,
  question and answer.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Final

import anyio
import anyio.to_thread
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.server import RateLimits, create_app
from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import serve
from tests.faults._load import Load, Outcome, summary
from tests.faults.conftest import FaultyStore
from tests.server._chat_support import JSON, submit

pytestmark = pytest.mark.anyio

CLIENTS: Final = 6
#: Load before the store goes away: at least this, and until every client completed a turn
#: (at most :data:`WARM_MAX_S` more).
WARM_S: Final = 1.5
WARM_MAX_S: Final = 20.0
#: The store stays away at least this long, and until the failure was seen by the clients,
#: ``/healthz`` and the log (or at most :data:`OUTAGE_MAX_S`: a PostgreSQL pool waits 10 s for
#: a connection before it fails).
OUTAGE_MIN_S: Final = 2.0
OUTAGE_MAX_S: Final = 13.0
#: Full service after the store is back, at most.
RECOVERY_S: Final = 5.0
#: Load after full service is back, all of which must be served.
STEADY_S: Final = 1.0
#: How long the test waits for recovery before giving up (to report how long it took).
RECOVERY_WAIT_S: Final = 15.0
#: A ``/healthz`` answer later than this is a hang (its checks time out after 5 s).
HEALTH_BOUND_S: Final = 7.0
#: The per-client limits are not under test here: generous ones keep their code path (and,
#: on Redis, their buckets in the failing store) without refusing the clients.
GENEROUS: Final = RateLimits(
    request_burst=100_000,
    requests_per_second=100_000.0,
    session_burst=100_000,
    sessions_per_hour=10_000_000.0,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logs() -> Iterator[list[logging.LogRecord]]:
    """Every record of the package's and uvicorn's loggers while the test runs."""
    handler = _Records()
    watched = [logging.getLogger(name) for name in ("agentskit_chat", "uvicorn")]
    levels = [logger.level for logger in watched]
    for logger in watched:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        for logger, level in zip(watched, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


async def _answer(text: str, request: AdapterRequest) -> AsyncIterator[str]:
    for piece in ("Noted: ", text, "."):
        yield piece
        await anyio.sleep(0.005)


def _chat() -> ChatDefinition:
    return define_chat(id="faults", chat=ChatConfig(adapter=reply_adapter(_answer)))


@dataclass
class _Health:
    """``/healthz`` answers: (started, status, seconds taken); status 0 for no answer."""

    samples: list[tuple[float, int, float]] = field(default_factory=list)
    stop: anyio.Event = field(default_factory=anyio.Event)

    async def poll(self, url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=HEALTH_BOUND_S) as http:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    status = (await http.get("/healthz")).status_code
                except httpx.HTTPError:
                    status = 0
                self.samples.append((started, status, time.monotonic() - started))
                await anyio.sleep(0.2)

    def between(self, start: float, end: float) -> list[int]:
        return [status for started, status, _ in self.samples if start <= started < end]


def _failure_records(
    records: list[logging.LogRecord], wall_start: float, wall_end: float
) -> list[logging.LogRecord]:
    return [
        record
        for record in records
        if record.name.startswith("agentskit_chat.")
        and record.levelno >= logging.WARNING
        and wall_start <= record.created <= wall_end
    ]


def _seen_down(load: Load, health: _Health, records: list[logging.LogRecord], down: float) -> bool:
    """Whether the outage was seen by a client (typed error), /healthz (503) and the log."""
    wall_down = time.time() - (time.monotonic() - down)
    return (
        bool(load.answered(down, time.monotonic(), "typed"))
        and 503 in health.between(down, time.monotonic())
        and bool(_failure_records(records, wall_down, time.time()))
    )


@dataclass
class _Probe:
    """After the store is back: a new conversation, tried until one turn completes."""

    completed_at: float | None = None
    attempts: list[Outcome] = field(default_factory=list)

    async def run(self, url: str, tag: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            for attempt in range(200):
                session_id = f"{tag}-probe-{attempt}"
                started = time.monotonic()
                body = submit(session_id=session_id, text="probe after the restart")
                try:
                    response = await http.post("/api/chat", content=body, headers=JSON)
                    last = response.text.splitlines()[-1] if response.text else ""
                    complete = response.status_code == 200 and '"status":"complete"' in last
                except httpx.HTTPError:
                    complete = False
                if complete:
                    self.completed_at = time.monotonic()
                    return
                self.attempts.append(Outcome("typed", started, time.monotonic(), 0))
                await anyio.sleep(0.1)


def _recovered_at(load: Load, health: _Health, probe: _Probe, up: float) -> float | None:
    """When full service was back: /healthz 200, the probe's new conversation, and a
    completed turn of every client (each in the conversation it was in); ``None`` if not."""
    healthy_at = next(
        (
            started + took
            for started, status, took in health.samples
            if started >= up and status == 200
        ),
        None,
    )
    if healthy_at is None or probe.completed_at is None:
        return None
    moments = [healthy_at, probe.completed_at]
    for number in range(CLIENTS):
        first = next(
            (o.ended for o in load.since(up, "complete") if o.client == number),
            None,
        )
        if first is None:
            return None
        moments.append(first)
    return max(moments)


async def _metrics(url: str) -> dict[str, float]:
    """``/metrics``: each sample's value by its name and labels (``name{label=value,...}``)."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200, response.status_code
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


def _total(metrics: dict[str, float], name: str, label: str = "") -> float:
    return sum(
        value for key, value in metrics.items() if key.startswith(name + "{") and label in key
    )


async def _lost_turns(url: str, completed: list[Outcome]) -> list[str]:
    """The completed turns (``session: question``) not in the store with their answer."""
    by_session: dict[str, list[str]] = {}
    for outcome in completed:
        by_session.setdefault(outcome.session_id, []).append(outcome.text)
    lost: list[str] = []
    async with open_chat_stores(url) as stores:
        for session_id, questions in by_session.items():
            memory = stores.memory(session_id)
            try:
                messages = list(await memory.load())
            finally:
                close = getattr(memory, "aclose", None)
                if close is not None:
                    await close()
            pairs = {
                question.content: answer.content
                for question, answer in itertools.pairwise(messages)
                if question.role == "user" and answer.role == "assistant"
            }
            lost += [
                f"{session_id}: {question}"
                for question in questions
                if pairs.get(question) != f"Noted: {question}."
            ]
    return lost


async def test_a_store_outage_is_typed_logged_and_unhealthy_and_service_returns_within_5_s(
    faulty_store: FaultyStore, logs: list[logging.LogRecord]
) -> None:
    app = create_app(_chat(), store=faulty_store.url, rate_limits=GENEROUS)
    tag = f"fault-{uuid.uuid4().hex[:8]}"
    health = _Health()
    probe = _Probe()
    began = time.monotonic()
    async with serve(app) as url:
        load = Load(url, tag)
        async with anyio.create_task_group() as group:
            for number in range(CLIENTS):
                group.start_soon(load.client, number)
            group.start_soon(health.poll, url)
            await anyio.sleep(WARM_S)
            with anyio.move_on_after(WARM_MAX_S):
                while {o.client for o in load.since(0, "complete")} != set(range(CLIENTS)):
                    await anyio.sleep(0.05)

            down = time.monotonic()
            wall_down = time.time()
            await anyio.to_thread.run_sync(faulty_store.stop)
            while time.monotonic() - down < OUTAGE_MAX_S:
                if time.monotonic() - down >= OUTAGE_MIN_S and _seen_down(load, health, logs, down):
                    break
                await anyio.sleep(0.1)
            await anyio.to_thread.run_sync(faulty_store.restart)
            up = time.monotonic()
            wall_up = time.time()

            group.start_soon(probe.run, url, tag)
            recovered: float | None = None
            while time.monotonic() - up < RECOVERY_WAIT_S:
                await anyio.sleep(0.1)
                recovered = _recovered_at(load, health, probe, up)
                if recovered is not None:
                    break
            await anyio.sleep(STEADY_S)  # and it stays so
            load.stop()
            health.stop.set()
        metrics = await _metrics(url)
        lost = await _lost_turns(faulty_store.url, load.since(0, "complete"))

    before = [o for o in load.outcomes if o.ended < down]
    during = load.answered(down, up)
    defects = [o for o in load.outcomes if o.kind == "defect"]
    counts = summary(load.outcomes)
    print(
        f"\n{faulty_store.backend}: {time.monotonic() - began:.1f} s in all; outage "
        f"{up - down:.1f} s; recovered in "
        f"{'-' if recovered is None else f'{recovered - up:.2f}'} s; {counts}; "
        f"/healthz during {sorted(set(health.between(down, up)))}"
    )

    # Before the outage: every request served.
    assert before, "no request ended before the outage"
    assert {o.kind for o in before} <= {"complete", "read"}, f"before: {summary(before)}"

    # Never a hang, a broken stream or an answer without a code, at any time.
    assert defects == [], summary(defects)

    # During: typed errors to clients.
    assert during, "no client got an answer while the store was away"
    typed = [o for o in during if o.kind == "typed"]
    assert typed, f"no client saw a typed error while the store was away: {summary(during)}"

    # During: /healthz says so, without hanging.
    statuses = [status for _, status, _ in health.samples]
    assert statuses, "/healthz was never asked"
    assert set(statuses) <= {200, 503}, statuses
    assert max(took for _, _, took in health.samples) < HEALTH_BOUND_S
    assert 503 in health.between(down, up), (
        f"/healthz never failed while the store was away: {health.between(down, up)}"
    )

    # During: the failures are logged, under agentskit_chat., with nothing of the conversation.
    failures = _failure_records(logs, wall_down, wall_up + 1.0)
    assert failures, (
        "no WARNING or ERROR record of an agentskit_chat. logger while the store was away "
        f"(records seen: {sorted({(r.name, r.levelname) for r in logs})})"
    )
    formatter = logging.Formatter()
    for record in logs:
        text = formatter.format(record)
        assert tag not in text, record.name
        assert "about invoice" not in text, record.name
        assert "Noted:" not in text, record.name
    crashes = [r for r in logs if r.name.startswith("uvicorn") and r.levelno >= logging.ERROR]
    assert crashes == [], [formatter.format(r)[:500] for r in crashes]

    # After: full service within 5 s.
    assert recovered is not None, (
        f"no full service {RECOVERY_WAIT_S:.0f} s after the restart: "
        f"{summary(load.since(up))}; /healthz {health.between(up, up + RECOVERY_WAIT_S)}; "
        f"new conversation {'completed' if probe.completed_at else 'never completed'}"
    )
    assert recovered - up <= RECOVERY_S, (
        f"full service {recovered - up:.2f} s after the restart: {summary(load.since(up))}"
    )
    after = load.since(recovered)
    assert after, "no request after full service was back"
    wall_recovered = wall_up + (recovered - up)
    assert {o.kind for o in after} <= {"complete", "read"}, (
        f"after full service was back ({recovered - up:.2f} s after the restart): "
        f"{summary(after)}; failures at "
        f"{[round(o.started - up, 2) for o in after if o.kind not in {'complete', 'read'}]} s "
        "after the restart; logged: "
        f"{[r.getMessage() for r in _failure_records(logs, wall_recovered, time.time())]}"
    )
    assert set(health.between(recovered, float("inf"))) <= {200}

    # The chat metrics counted it: store errors, and exactly the turns the clients saw
    # complete (theirs and the probe's).
    assert _total(metrics, "agentskit_chat_store_errors_total") > 0, metrics
    completed = len(load.since(0, "complete")) + 1
    assert _total(metrics, "agentskit_chat_turns_finished_total", "outcome=completed") == completed
    assert _total(metrics, "agentskit_chat_turns_started_total") >= completed

    # Nothing committed lost.
    assert load.since(0, "complete"), "no turn completed"
    assert lost == []
