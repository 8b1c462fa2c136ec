"""Onboarding: a form, a recommendation, and a completion step a human confirms.

A statechart walks every session through ``welcome → collecting → review → confirming →
complete``:

- ``onboarding`` shows a form (your role and your first goal); submitting it is checked by the
  server against the form (a missing field is refused and nothing runs) and by this chat
  (a blank goal is refused);
- ``recommend`` (only once the form was submitted) offers a starter setup: "Use this setup"
  or "Revise answers" (clicking one, or typing ``accept`` / ``revise``);
- ``accept`` offers "Complete onboarding", whose click proposes the ``complete-onboarding``
  tool behind a confirmation and a capability policy;
- ``done`` (only once that call was approved) finishes.

The session's state is the statechart's, stored with the session, and everything else — the
answers, the choice, whether the completion was approved — is read from the conversation
itself, which the store keeps for every worker: nothing lives in this process.

Run it (no API key needed; the chat answers anything else with a hint)::

    python examples/onboarding/app.py                       # the page at http://127.0.0.1:8000
    agentskit-chat serve examples/onboarding/app.py:chat
    agentskit-chat chat examples/onboarding/app.py:chat     # forms work in the terminal too
    python examples/onboarding/app.py --model openai:gpt-4o-mini
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentskit_chat import serve
from agentskit_chat.actions import PolicyContext, create_capability_policy
from agentskit_chat.conversation import (
    ChatDefinition,
    ChatPage,
    ConversationDefinition,
    ConversationStateDefinition,
    Route,
    RouteContext,
    define_chat,
    message_interaction,
    with_action_policy,
)
from agentskit_chat.protocol import (
    ComponentInteractEvent,
    ComponentPart,
    create_assistant_content_encoder,
    decode_assistant_content,
)
from agentskit_chat.runtime import (
    AdapterRequest,
    ChatAdapter,
    ChatConfig,
    ChatMessage,
    ChatTool,
    reply_adapter,
)

__all__ = [
    "COMPLETE_TOOL",
    "DEMO_CONTEXT",
    "FORM_PROPS",
    "ROLES",
    "HostContext",
    "Profile",
    "Recommendation",
    "Recommender",
    "build_onboarding_chat",
    "chat",
    "default_recommender",
    "main",
    "safe_id",
]

COMPLETE_TOOL: Final = "complete-onboarding"
#: The roles the form offers, by id.
ROLES: Final[Mapping[str, str]] = {
    "engineering": "Engineering",
    "product": "Product",
    "support": "Support",
}
#: The form every session fills in.
FORM_PROPS: Final[Mapping[str, Any]] = {
    "title": "Tell us how you work",
    "submitLabel": "Save answers",
    "fields": [
        {
            "id": "role",
            "label": "Primary role",
            "type": "select",
            "required": True,
            "options": [{"id": key, "label": label} for key, label in ROLES.items()],
        },
        {
            "id": "goal",
            "label": "First goal",
            "type": "text",
            "required": True,
            "placeholder": "Automate customer handoffs",
        },
    ],
}
_FORM: Final = "onboarding-form"
_RECOMMENDATION: Final = "onboarding-recommendation"
_HINT: Final = (
    "This is the onboarding assistant. Type onboarding to start, recommend once you saved "
    "your answers, accept or revise, then done."
)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]+")


def safe_id(prefix: str, identity: str) -> str:
    """``<prefix>-<identity>`` as a safe identifier (characters outside ``A-Za-z0-9._:-``
    become ``-``; at most 128)."""
    return _UNSAFE.sub("-", f"{prefix}-{identity}")[:128]


@dataclass(frozen=True, slots=True)
class HostContext:
    """The caller as the host authenticated them (never read from a prompt or a form)."""

    session_id: str
    customer_id: str
    capabilities: tuple[str, ...] = ()


DEMO_CONTEXT: Final = HostContext("onboarding-demo", "customer-demo", ("onboarding.complete",))


@dataclass(frozen=True, slots=True)
class Profile:
    """What the form said: a role id and a goal."""

    role: str
    goal: str


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A starter setup."""

    title: str
    description: str


#: Recommends a setup for a profile (it may look it up).
Recommender = Callable[[Profile], Recommendation | Awaitable[Recommendation]]


def default_recommender(profile: Profile) -> Recommendation:
    """``<role> starter``: a guided workspace for the goal."""
    return Recommendation(f"{profile.role} starter", f"A guided workspace for {profile.goal}.")


# --- reading the conversation ------------------------------------------------------------------


def _frames(messages: Sequence[ChatMessage]) -> list[tuple[int, str]]:
    """``(position, instance id)`` of every component the assistant showed, oldest first."""
    shown: list[tuple[int, str]] = []
    for index, message in enumerate(messages):
        if message.role != "assistant" or not message.content:
            continue
        decoded = decode_assistant_content(message.content)
        if decoded.ok:
            shown += [
                (index, part.frame.instance_id)
                for part in decoded.parts
                if isinstance(part, ComponentPart)
            ]
    return shown


def _newest(messages: Sequence[ChatMessage], prefix: str) -> tuple[int, str] | None:
    found = [item for item in _frames(messages) if item[1].startswith(f"{prefix}-")]
    return found[-1] if found else None


def _profile_of(value: object) -> Profile | None:
    if not isinstance(value, Mapping):
        return None
    role, goal = value.get("role"), value.get("goal")
    if role not in ROLES or not isinstance(goal, str) or not goal.strip():
        return None
    return Profile(str(role), " ".join(goal.split()))


def profile(messages: Sequence[ChatMessage]) -> Profile | None:
    """The answers given to the newest form, if they were valid."""
    form = _newest(messages, _FORM)
    if form is None:
        return None
    for message in messages[form[0] + 1 :]:
        event = message_interaction(message) if message.role == "user" else None
        if event is not None and event.instance_id == form[1] and event.event == "submit":
            return _profile_of(event.value)
    return None


def _form_is_open(messages: Sequence[ChatMessage], instance_id: str) -> bool:
    """Whether ``instance_id`` is the newest form and no recommendation followed it."""
    form = _newest(messages, _FORM)
    later = _newest(messages, _RECOMMENDATION)
    return form is not None and form[1] == instance_id and (later is None or later[0] < form[0])


def completed(messages: Sequence[ChatMessage]) -> bool:
    """Whether the completion was approved and ran since the newest form."""
    form = _newest(messages, _FORM)
    start = form[0] + 1 if form is not None else 0
    return any(
        call.name == COMPLETE_TOOL and call.status == "complete"
        for message in messages[start:]
        for call in message.tool_calls or ()
    )


# --- replies -------------------------------------------------------------------------------------


def _frame(key: str, instance_id: str, props: Mapping[str, Any], summary: str) -> str:
    frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": key,
        "instanceId": instance_id,
        "props": props,
        "fallback": {"kind": "text", "summary": summary},
    }
    return create_assistant_content_encoder().encode({"kind": "component", "frame": frame})


def _identity(context: RouteContext) -> str:
    return context.message_id or context.session_id


def _form(text: str, context: RouteContext) -> str:
    return _frame(
        "form",
        safe_id(_FORM, _identity(context)),
        FORM_PROPS,
        "Collect your primary role and first goal.",
    )


def _words(*accepted: str) -> Callable[[str], bool]:
    """Matches any of ``accepted``, with or without a leading ``/``, in any letter case."""
    words = {word.lower() for word in accepted} | {f"/{word.lower()}" for word in accepted}
    return lambda text: text.strip().lower() in words


def _recommend(recommender: Recommender) -> Callable[[str, RouteContext], Awaitable[str]]:
    async def respond(text: str, context: RouteContext) -> str:
        answers = profile(context.messages)
        assert answers is not None  # the route's guard
        made = recommender(answers)
        recommendation = made if isinstance(made, Recommendation) else await made
        props = {
            "prompt": recommendation.title,
            "choices": [
                {
                    "id": "accept",
                    "label": "Use this setup",
                    "description": recommendation.description,
                },
                {"id": "revise", "label": "Revise answers"},
            ],
        }
        summary = f"{recommendation.title}: {recommendation.description}"
        return _frame("choice-list", safe_id(_RECOMMENDATION, _identity(context)), props, summary)

    return respond


def _accept(text: str, context: RouteContext) -> str:
    props = {
        "prompt": "Ready to create your workspace?",
        "choices": [
            {
                "id": "complete",
                "label": "Complete onboarding",
                "action": {"name": COMPLETE_TOOL, "input": {}},
            }
        ],
    }
    instance = safe_id("onboarding-complete", _identity(context))
    return _frame("choice-list", instance, props, "Confirm onboarding completion.")


def _on_interaction(event: ComponentInteractEvent, context: RouteContext) -> str | None:
    """A submitted form: saved when it is the open form and its answers are usable."""
    if event.component_key != "form":
        return None
    if not _form_is_open(context.messages, event.instance_id):
        return "This form is no longer open. Type revise to answer again."
    answers = _profile_of(event.value)
    if answers is None:
        return "Please choose a role and write a goal, then save your answers again."
    return f"Saved: {ROLES[answers.role]}, “{answers.goal}”. Type recommend for a starter setup."


def _fallback(text: str, request: AdapterRequest) -> str:
    calls = [call for message in request.messages for call in message.tool_calls or ()]
    if calls and calls[-1].name == COMPLETE_TOOL and request.messages[-2].tool_calls:
        if calls[-1].status == "complete":
            return "Onboarding confirmed. Type done to open your workspace."
        return "Onboarding was not completed. Click Complete onboarding when you are ready."
    return _HINT


def _model_adapter(model: str) -> ChatAdapter:
    from pydantic_ai import Agent  # noqa: PLC0415 - only with a model

    from agentskit_chat.agents import from_pydantic_ai, resolve_model  # noqa: PLC0415

    agent: Agent[None, str] = Agent(resolve_model(model), instructions=_HINT)
    return from_pydantic_ai(agent)


def build_onboarding_chat(
    *,
    context: HostContext = DEMO_CONTEXT,
    recommender: Recommender = default_recommender,
    adapter: ChatAdapter | None = None,
) -> ChatDefinition:
    """The onboarding chat for one authenticated caller.

    Args:
        context: The caller, from the host's authentication.
        recommender: Recommends a setup for the answers (it may be ``async``); when it raises,
            the turn fails and the session stays in ``collecting``.
        adapter: Answers everything the routes do not; a fixed hint by default.
    """

    async def complete(args: Mapping[str, Any]) -> str:
        return "Onboarding confirmed."

    tool = ChatTool(
        name=COMPLETE_TOOL,
        description="Complete onboarding after explicit confirmation.",
        parameters={"type": "object", "additionalProperties": False},
        execute=complete,
        requires_confirmation=True,
    )

    def has_profile(route: RouteContext) -> bool:
        return profile(route.messages) is not None

    def is_completed(route: RouteContext) -> bool:
        return completed(route.messages)

    state = ConversationStateDefinition
    definition = define_chat(
        id="onboarding-reference",
        chat=ChatConfig(adapter=adapter or reply_adapter(_fallback), tools=(tool,)),
        conversation=ConversationDefinition(
            initial="welcome",
            states={
                "welcome": state(on={"begin": "collecting"}, actions=("begin",)),
                "collecting": state(on={"recommend": "review"}, actions=("recommend",)),
                "review": state(
                    on={"accept": "confirming", "revise": "collecting"},
                    actions=("accept", "revise"),
                ),
                "confirming": state(
                    on={"done": "complete", "revise": "collecting"}, actions=("done", "revise")
                ),
                "complete": state(),
            },
            routes=(
                Route(id="begin", event="begin", match=_words("onboarding"), response=_form),
                Route(
                    id="recommend",
                    event="recommend",
                    match=_words("recommend"),
                    guard=has_profile,
                    response=_recommend(recommender),
                ),
                Route(
                    id="accept",
                    event="accept",
                    match=_words("accept", "Use this setup"),
                    response=_accept,
                ),
                Route(
                    id="revise",
                    event="revise",
                    match=_words("revise", "Revise answers"),
                    states=("review", "confirming"),
                    guard=has_profile,
                    response=_form,
                ),
                Route(
                    id="done",
                    event="done",
                    match=_words("done"),
                    guard=is_completed,
                    response=lambda text, route: (
                        "Onboarding complete. Your guided workspace is ready."
                    ),
                ),
            ),
        ),
        on_interaction=_on_interaction,
        page=ChatPage(
            title="Onboarding",
            subtitle="Tell us how you work; we set up a workspace once you confirm.",
            suggestions=("onboarding",),
            placeholder="Type onboarding to start",
            logo="ON",
        ),
    )
    policy = create_capability_policy(
        session_id=context.session_id,
        get_context=lambda: PolicyContext(context.session_id, context.capabilities),
        requirements={COMPLETE_TOOL: ["onboarding.complete"]},
    )
    return with_action_policy(definition, policy)


def chat() -> ChatDefinition:
    """The demo chat (``AGENTSKIT_MODEL`` answers what the routes do not, when it is set)."""
    model = os.environ.get("AGENTSKIT_MODEL")
    return build_onboarding_chat(adapter=_model_adapter(model) if model else None)


def main(argv: Sequence[str] | None = None) -> None:
    """``python examples/onboarding/app.py [--model M] [--port N] [--store URL]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A pydantic-ai model, e.g. openai:gpt-4o-mini.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default="memory:", help="memory:, sqlite:///onboarding.db")
    options = parser.parse_args(argv)
    model = options.model or os.environ.get("AGENTSKIT_MODEL") or None
    serve(
        lambda: build_onboarding_chat(adapter=_model_adapter(model) if model else None),
        port=options.port,
        store=options.store,
    )


if __name__ == "__main__":
    main()
