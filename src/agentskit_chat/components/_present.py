"""How every renderer (the web page, the terminal) turns one chat message into what it shows.

A message becomes an ordered tuple of parts. Text is text; a component frame becomes a
:class:`PresentedComponent` only when it resolves against the chat's manifest, so a frame for
an unregistered component, or with props its schema rejects, never reaches a renderer: it is
a :class:`PresentedFallback` with plain text instead. Content that does not decode is a
:class:`PresentedDiagnostic`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentskit_chat.protocol import (
    ComponentFrame,
    ComponentPart,
    Diagnostic,
    decode_assistant_content,
    is_component_frame_candidate,
)
from agentskit_chat.runtime import ChatMessage

from ._definition import ComponentDefinition
from ._registry import (
    STANDARD_COMPONENT_MANIFEST,
    ComponentManifest,
    ResolvedComponent,
    format_fallback,
    resolve_component_frame,
)

__all__ = [
    "PresentedComponent",
    "PresentedDiagnostic",
    "PresentedFallback",
    "PresentedPart",
    "PresentedText",
    "present_chat_message",
]

_RECORD_SEPARATOR = "\x1e"


@dataclass(frozen=True, slots=True)
class PresentedText:
    """Text to show: ``message`` is a copy of the chat message whose ``content`` is only this
    run of text (consecutive text records joined)."""

    message: ChatMessage


@dataclass(frozen=True, slots=True)
class PresentedComponent:
    """A registered component with valid props: render it natively.

    Attributes:
        frame: The frame (its ``instance_id`` identifies selections and interactions).
        definition: The registered component.
        props: The validated props (an instance of the definition's props model).
        fallback_text: Its plain-text summary, for renderers that show text only.
    """

    frame: ComponentFrame
    definition: ComponentDefinition
    props: object
    fallback_text: str


@dataclass(frozen=True, slots=True)
class PresentedFallback:
    """A frame that must not be rendered as a component: show ``text`` instead.

    Attributes:
        text: ``[unsupported visual: <kind>] <summary>`` from the frame's own fallback.
        diagnostic: Why it did not resolve (``COMPONENT_UNKNOWN``, ``COMPONENT_INVALID_PROPS``).
        frame: The frame.
    """

    text: str
    diagnostic: Diagnostic
    frame: ComponentFrame


@dataclass(frozen=True, slots=True)
class PresentedDiagnostic:
    """Content that could not be read: show an alert with ``message`` (never the content)."""

    code: str
    message: str


#: One part of a presented message.
PresentedPart = PresentedText | PresentedComponent | PresentedFallback | PresentedDiagnostic


def _frame_part(frame: object, manifest: ComponentManifest) -> PresentedPart:
    resolution = resolve_component_frame(frame, manifest)
    if isinstance(resolution, ResolvedComponent):
        return PresentedComponent(
            resolution.frame, resolution.definition, resolution.props, resolution.fallback_text
        )
    if resolution.frame is None:
        return PresentedDiagnostic(resolution.diagnostic.code, resolution.diagnostic.message)
    return PresentedFallback(
        format_fallback(resolution.frame.fallback), resolution.diagnostic, resolution.frame
    )


def present_chat_message(
    message: ChatMessage, manifest: ComponentManifest = STANDARD_COMPONENT_MANIFEST
) -> tuple[PresentedPart, ...]:
    """The parts to show for ``message``, in order. Never raises.

    - An assistant message in ordered content (it starts with U+001E): its records in order,
      consecutive text joined into one :class:`PresentedText`; while it streams, only the
      records complete so far. Content that does not decode is one
      :class:`PresentedDiagnostic` (for example ``ASSISTANT_CONTENT_INVALID_RECORD``).
    - An assistant message that is one component frame (JSON with the component protocol):
      that frame.
    - Anything else, every user message included: one :class:`PresentedText`.

    Frames become :class:`PresentedComponent` only when they resolve against ``manifest``
    (the twelve standard components by default); otherwise :class:`PresentedFallback`.
    """
    content = message.content
    if message.role != "assistant" or not isinstance(content, str):
        return (PresentedText(message),)
    if content.startswith(_RECORD_SEPARATOR):
        decoded = decode_assistant_content(content)
        if not decoded.ok:
            assert decoded.diagnostic is not None
            return (PresentedDiagnostic(decoded.diagnostic.code, decoded.diagnostic.message),)
        parts: list[PresentedPart] = []
        texts: list[str] = []

        def flush() -> None:
            if texts:
                parts.append(PresentedText(replace(message, content="".join(texts))))
                texts.clear()

        for part in decoded.parts:
            if isinstance(part, ComponentPart):
                flush()
                parts.append(_frame_part(part.frame, manifest))
            else:
                texts.append(part.text)
        flush()
        return tuple(parts)
    if is_component_frame_candidate(content):
        return (_frame_part(content, manifest),)
    return (PresentedText(message),)
