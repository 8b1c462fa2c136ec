"""The eight conformance cases pass through both the resolver and the adapter."""

from __future__ import annotations

import pytest

from agentskit_chat.answers.fixtures import (
    DETERMINISTIC_ANSWER_CASES,
    DeterministicAnswerCase,
    ScriptedAdapter,
    run_fixture,
)
from agentskit_chat.protocol import decode_answer_response

pytestmark = pytest.mark.anyio

CASES = {case.name: case for case in DETERMINISTIC_ANSWER_CASES}


def test_the_eight_cases_in_order() -> None:
    assert list(CASES) == [
        "exact match",
        "ambiguity",
        "miss",
        "stale",
        "corrupt",
        "hash mismatch",
        "backend provenance",
        "offline",
    ]


@pytest.mark.parametrize("case", DETERMINISTIC_ANSWER_CASES, ids=lambda c: c.name)
def test_expected_envelopes_are_valid(case: DeterministicAnswerCase) -> None:
    for expected in (case.expected, case.expected_adapter):
        decoded = decode_answer_response(dict(expected))
        assert decoded.ok
        assert decoded.value.to_wire() == expected


@pytest.mark.parametrize("case", DETERMINISTIC_ANSWER_CASES, ids=lambda c: c.name)
async def test_case_passes_through_the_resolver(case: DeterministicAnswerCase) -> None:
    result = await run_fixture(case, case.create_resolver())
    assert result.passed, result.actual
    assert result.actual == case.expected


@pytest.mark.parametrize("case", DETERMINISTIC_ANSWER_CASES, ids=lambda c: c.name)
async def test_case_passes_through_the_adapter(case: DeterministicAnswerCase) -> None:
    backend = case.create_fallback()
    result = await run_fixture(case, case.create_adapter(fallback=backend))
    assert result.passed, result.actual
    # The backend is called exactly when the case escalates to one.
    called = case.expected_adapter["confidence"]["basis"] == "backend"
    assert (backend is not None and backend.requests != []) is called
    if called:
        assert backend is not None
        assert backend.session_ids == ["fixture-session"]


async def test_a_wrong_subject_fails_the_case() -> None:
    exact = CASES["exact match"]
    stale = CASES["stale"]
    result = await run_fixture(exact, stale.create_resolver())
    assert not result.passed
    assert result.expected == exact.expected
    assert result.actual is not None
    assert result.actual["reason"] == "stale"


async def test_an_adapter_that_attaches_nothing_fails() -> None:
    silent = ScriptedAdapter([])
    result = await run_fixture(CASES["exact match"], silent)
    assert not result.passed
    assert result.actual is None
    assert silent.session_ids == ["fixture-session"]


async def test_your_own_backend_can_stand_in() -> None:
    case = CASES["backend provenance"]
    other = ScriptedAdapter.text("Something else.")
    result = await run_fixture(case, case.create_adapter(fallback=other))
    assert not result.passed
    assert result.actual is not None
    assert result.actual["answer"]["markdown"] == "Something else."
