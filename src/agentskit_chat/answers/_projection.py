"""Projecting a decision into ordered assistant content, and the SourceList props rule.

An answer becomes its Markdown plus a ``source-list`` frame for its citations; choices become
the decision message plus a ``choice-list`` frame whose choices show each entry's unique alias;
an escalation becomes its message. A fresh encoder is used each time, so the content always
starts with the ``agentskit.chat.content/1`` prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from agentskit_chat.errors import ProtocolError
from agentskit_chat.protocol import (
    COMPONENT_PROTOCOL,
    AnswerEnvelope,
    ChoicesAnswer,
    ComponentFrame,
    ExactAnswer,
    create_assistant_content_encoder,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._href import is_safe_href
from agentskit_chat.protocol._text import utf16_len
from agentskit_chat.protocol._types import is_safe_id

__all__ = ["project_decision", "safe_instance_id", "source_list_sources"]

#: Called with a choice-list frame and its ``choice id → alias`` map, before it is encoded.
Remember = Callable[[ComponentFrame, dict[str, str]], object]

_ID_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
_ALNUM: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_MAX_ID: Final = 128
_SOURCE_LIST_KEYS: Final = frozenset({"label", "sources"})
_SOURCE_KEYS: Final = frozenset({"id", "title", "url", "snippet"})
_MAX_SOURCES: Final = 50


def safe_instance_id(value: str, fallback: str) -> str:
    """Every UTF-16 unit outside ``[A-Za-z0-9._:-]`` becomes ``-`` (an astral character ``--``),
    cut to 128; ``fallback`` when the result does not start with an ASCII letter or digit.

    >>> safe_instance_id("sources-user/1", "deterministic-sources")
    'sources-user-1'
    """
    out = "".join(ch if ch in _ID_CHARS else ("--" if ord(ch) > 0xFFFF else "-") for ch in value)[
        :_MAX_ID
    ]
    return out if out[:1] in _ALNUM and out else fallback


def _text(value: Any, lo: int, hi: int) -> bool:
    return type(value) is str and lo <= utf16_len(value) <= hi


def source_list_sources(props: Any) -> tuple[Mapping[str, Any], ...] | None:
    """The sources of valid ``source-list`` props, or ``None`` when the props are invalid.

    The props rule of the standard catalog: a strict object ``{label, sources}``; ``label``
    1..256 units; 1..50 sources, each a strict ``{id, title, url?, snippet?}`` with a safe id,
    a 1..256-unit title, a portable URL and a 1..4096-unit snippet; ids unique.
    """
    if not isinstance(props, Mapping) or not set(props).issubset(_SOURCE_LIST_KEYS):
        return None
    label, sources = props.get("label"), props.get("sources")
    if not _text(label, 1, 256) or not isinstance(sources, list | tuple):
        return None
    if not 1 <= len(sources) <= _MAX_SOURCES:
        return None
    seen: set[str] = set()
    for source in sources:
        if not isinstance(source, Mapping) or not set(source).issubset(_SOURCE_KEYS):
            return None
        source_id = source.get("id")
        if type(source_id) is not str or not is_safe_id(source_id) or source_id in seen:
            return None
        if not _text(source.get("title"), 1, 256):
            return None
        if "url" in source and not is_safe_href(source["url"]):
            return None
        if "snippet" in source and not _text(source["snippet"], 1, 4096):
            return None
        seen.add(source_id)
    return tuple(sources)


def _frame(key: str, instance_id: str, props: dict[str, Any], summary: str) -> ComponentFrame:
    frame = validate_model(
        ComponentFrame,
        {
            "protocol": COMPONENT_PROTOCOL,
            "version": 1,
            "type": "render",
            "componentKey": key,
            "instanceId": instance_id,
            "props": props,
            "fallback": {"kind": key, "summary": summary},
        },
    )
    if frame is None:  # pragma: no cover - every input is validated upstream
        raise ProtocolError("COMPONENT_INVALID_FRAME", "Component frame payload is invalid.")
    return frame


def _sources_frame(answer: ExactAnswer, message_id: str) -> ComponentFrame | None:
    sources: list[dict[str, str]] = []
    seen: set[str] = set()
    for citation in answer.answer.citations:
        # A source list needs unique ids; an artifact may cite one id twice. Keep the first.
        if citation.id in seen:
            continue
        seen.add(citation.id)
        sources.append({"id": citation.id, "title": citation.title, "url": citation.href})
    if not sources:
        return None
    summary = "Sources: " + ", ".join(source["title"] for source in sources) + "."
    instance_id = safe_instance_id("sources-" + message_id, "deterministic-sources")
    props = {"label": "Sources", "sources": sources}
    return _frame("source-list", instance_id, props, summary)


def _choices_frame(decision: ChoicesAnswer, message_id: str) -> ComponentFrame:
    choices = [{"id": s.id, "label": s.label, "description": s.value} for s in decision.suggestions]
    summary = decision.message + " " + ", ".join(s.label for s in decision.suggestions) + "."
    instance_id = safe_instance_id("deterministic-choices-" + message_id, "deterministic-choices")
    props = {"prompt": decision.message, "choices": choices}
    return _frame("choice-list", instance_id, props, summary)


def project_decision(decision: AnswerEnvelope, *, message_id: str, remember: Remember) -> str:
    """The ordered assistant content of a local decision.

    Args:
        decision: The envelope to show.
        message_id: The id of the user message it answers; instance ids derive from it.
        remember: Called with a ``choice-list`` frame (and its ``choice id → alias`` map)
            before the frame is encoded, so that a selection can be reserved.
    """
    encoder = create_assistant_content_encoder()
    if isinstance(decision, ExactAnswer):
        content = encoder.encode({"kind": "text", "text": decision.answer.markdown})
        frame = _sources_frame(decision, message_id)
        if frame is not None:
            content += encoder.encode({"kind": "component", "frame": frame.to_wire()})
        return content
    if isinstance(decision, ChoicesAnswer):
        frame = _choices_frame(decision, message_id)
        remember(frame, {s.id: s.value for s in decision.suggestions})
        content = encoder.encode({"kind": "text", "text": decision.message})
        return content + encoder.encode({"kind": "component", "frame": frame.to_wire()})
    return encoder.encode({"kind": "text", "text": decision.message})
