"""The onboarding example over a real socket: form, recommendation, confirmed completion."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.server import create_app
from examples.onboarding import app as onboarding
from tests.assistant._support import serve
from tests.examples._support import Client, Turn, waiting

pytestmark = pytest.mark.anyio

ANSWERS = {"role": "engineering", "goal": "Automate handoffs"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_walkthrough_from_the_form_to_a_confirmed_completion(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    first = create_app(onboarding.build_onboarding_chat(), store=store)
    second = create_app(onboarding.build_onboarding_chat(), store=store)
    async with serve(first) as one, serve(second) as two:
        client = Client(one)
        early = await client.send("recommend")
        assert early.answer == onboarding._HINT  # no answers yet: the model answers
        form = (await client.send("onboarding")).frame()
        assert form["componentKey"] == "form"
        assert form["props"]["title"] == "Tell us how you work"
        client.url = two  # every step may land on another worker
        saved = await client.interact(form, "submit", ANSWERS)
        assert saved.answer.startswith("Saved: Engineering, “Automate handoffs”.")
        client.url = one
        offer = (await client.send("recommend")).frame()
        assert offer["props"]["prompt"] == "engineering starter"
        accepted = await client.select(offer, "accept")
        complete = accepted.frame()
        assert complete["props"]["choices"][0]["action"]["name"] == onboarding.COMPLETE_TOOL
        early_done = await client.send("done")
        assert early_done.answer == onboarding._HINT  # not approved yet
        client.url = two
        call = waiting(await client.select(complete, "complete"))
        approved = await client.decide(call["id"], "approve")
        assert approved.answer == "Onboarding confirmed. Type done to open your workspace."
        finished = await client.send("done")
    assert finished.answer == "Onboarding complete. Your guided workspace is ready."


async def test_a_form_with_an_invalid_field_is_refused_and_nothing_runs() -> None:
    recommended: list[onboarding.Profile] = []

    def recommender(profile: onboarding.Profile) -> onboarding.Recommendation:
        recommended.append(profile)
        return onboarding.default_recommender(profile)

    definition = onboarding.build_onboarding_chat(recommender=recommender)
    async with serve(create_app(definition)) as url:
        client = Client(url)
        form = (await client.send("onboarding")).frame()
        unknown = await client.interact(form, "submit", {"role": "sales", "goal": "x"})
        missing = await client.interact(form, "submit", {"role": "product"})
        blank = await client.interact(form, "submit", {"role": "product", "goal": "   "})
        not_yet = await client.send("recommend")
    assert unknown.status == missing.status == 400
    assert unknown.diagnostics == missing.diagnostics == ["INTERACTION_INVALID"]
    assert "sales" not in str(unknown.lines)
    assert blank.answer.startswith("Please choose a role and write a goal")
    assert not_yet.answer == onboarding._HINT
    assert recommended == []


async def test_revising_starts_over_and_a_failing_recommender_keeps_collecting(
    tmp_path: Path,
) -> None:
    def broken(profile: onboarding.Profile) -> onboarding.Recommendation:
        raise RuntimeError("recommendations are down")

    store = f"sqlite:///{tmp_path / 'chat.db'}"
    working = onboarding.build_onboarding_chat()
    failing_chat = onboarding.build_onboarding_chat(recommender=broken)
    async with (
        serve(create_app(working, store=store)) as good,
        serve(create_app(failing_chat, store=store)) as bad,
    ):
        client = Client(good)
        form = (await client.send("onboarding")).frame()
        await client.interact(form, "submit", ANSWERS)
        offer = (await client.send("recommend")).frame()
        revised: Turn = await client.send("revise")
        again = revised.frame()
        assert again["componentKey"] == "form"
        assert again["instanceId"] != form["instanceId"]
        stale = await client.interact(form, "submit", ANSWERS)
        assert stale.status == 409  # the first form was used already
        assert offer["componentKey"] == "choice-list"
        no_answers = await client.send("recommend")
        assert no_answers.answer == onboarding._HINT  # the new form is not answered yet

        failing = Client(bad, session_id="session-2")
        form = (await failing.send("onboarding")).frame()
        await failing.interact(form, "submit", ANSWERS)
        failed = await failing.send("recommend")
        assert failed.lines[-1]["payload"]["status"] == "error"
        failing.url = good  # the same session, now with a recommender that works
        recovered = await failing.send("recommend")
    assert recovered.frame()["props"]["prompt"] == "engineering starter"
