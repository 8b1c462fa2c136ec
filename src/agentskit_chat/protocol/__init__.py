"""Wire contracts of AgentsKit Chat v1, byte-compatible with the TypeScript reference v0.4.

Everything here is pure: no I/O. Decoders take untrusted ``bytes``, ``str`` or parsed values and
return a :data:`DecodeResult`; they never raise on bad input and never echo it. Models are frozen
pydantic models whose ``to_json()`` writes the reference's exact bytes. See ``docs/protocol.md``.
"""

from __future__ import annotations

import typing as _typing

from agentskit_chat._lazy import lazy_attribute as _lazy_attribute

if _typing.TYPE_CHECKING:
    from ._answer import (
        ANSWER_PROTOCOL,
        AnswerBody,
        AnswerEnvelope,
        AnswerResponse,
        BackendProvenance,
        ChoicesAnswer,
        Confidence,
        EscalationAnswer,
        ExactAnswer,
        LocalProvenance,
        Suggestion,
        decode_answer_response,
        validate_answer_envelope,
    )
    from ._ask import (
        ASK_EVENT_MAX_BYTES,
        ASK_EVENT_MAX_RECORDS,
        ASK_SERVICE_PROTOCOL_VERSION,
        AskDoneEvent,
        AskErrorEvent,
        AskEvent,
        AskEventModel,
        AskTextEvent,
        AskToolEvent,
        encode_ask_event,
        validate_ask_event,
    )
    from ._ask_errors import (
        ASK_ERROR_CASES,
        AskErrorCase,
    )
    from ._ask_ndjson import (
        AskDecodeResult,
        AskEventDecoder,
        decode_ask_events,
    )
    from ._backend import (
        ASK_DIAGNOSTIC_CODES,
        ASK_MAX_SOURCES,
        ASK_REQUEST_MAX_MESSAGE_CHARS,
        ASK_REQUEST_MAX_MESSAGES,
        ASK_REQUEST_PROTOCOL,
        ASK_REQUEST_VERSION,
        BACKEND_INVALID_PAYLOAD,
        BACKEND_METRIC_NAMES,
        BACKEND_METRIC_PROTOCOL,
        BACKEND_METRIC_UNIT_BY_NAME,
        BACKEND_METRIC_UNITS,
        BACKEND_METRIC_VERSION,
        BACKEND_SITE_PROTOCOL,
        BACKEND_SITE_VERSION,
        AskDiagnostic,
        AskMessage,
        AskRequest,
        AskSessionRecord,
        AskUsage,
        BackendMetric,
        BackendSiteAssistant,
        BackendSiteConfig,
        BackendSiteCorpus,
        BackendSiteLimits,
        BackendSitePersistence,
        GroundedSource,
        decode_ask_diagnostic,
        decode_ask_request,
        decode_ask_session_record,
        decode_ask_usage,
        decode_backend_metric,
        decode_backend_site_config,
        decode_grounded_source,
    )
    from ._bounded import (
        MAX_BOUNDED_ARRAY_ITEMS,
        MAX_BOUNDED_DEPTH,
        MAX_BOUNDED_KEY_UNITS,
        MAX_BOUNDED_NODES,
        MAX_BOUNDED_OBJECT_KEYS,
        MAX_BOUNDED_STRING_UNITS,
        BoundedJson,
        is_bounded_json,
    )
    from ._component import (
        COMPONENT_PROTOCOL,
        COMPONENT_VERSION,
        ComponentEvent,
        ComponentFrame,
        ComponentInteractEvent,
        ComponentSelectEvent,
        SemanticFallback,
        create_component_interaction_event,
        create_component_select_event,
        decode_component_frame,
        encode_component_event,
        format_semantic_fallback,
        is_component_frame_candidate,
    )
    from ._content import (
        ASSISTANT_CONTENT_MAX_BYTES,
        ASSISTANT_CONTENT_MAX_RECORDS,
        ASSISTANT_CONTENT_PREFIX,
        ASSISTANT_CONTENT_PREFIX_ROOT,
        AssistantContentDecodeResult,
        AssistantContentEncoder,
        AssistantContentPart,
        ComponentPart,
        ContentDecoded,
        TextPart,
        create_assistant_content_encoder,
        decode_assistant_content,
        is_assistant_content_candidate,
    )
    from ._cursor import (
        TurnSnapshotCursor,
        create_turn_snapshot_cursor,
    )
    from ._href import (
        is_safe_href,
    )
    from ._knowledge import (
        KNOWLEDGE_ENTRY_KINDS,
        KNOWLEDGE_PROTOCOL,
        SITE_PROTOCOL,
        Citation,
        DeterministicSiteConfig,
        KnowledgeAnswer,
        KnowledgeEntry,
        KnowledgeMatch,
        LocalKnowledgeArtifact,
        SiteArtifactRef,
        SiteFallback,
        canonicalize_local_knowledge_artifact,
        compute_local_knowledge_artifact_content_hash,
        decode_deterministic_site_config,
        decode_local_knowledge_artifact,
        verify_local_knowledge_artifact,
    )
    from ._message import (
        MESSAGE_MAX_CONTAINER_SIZE,
        MESSAGE_MAX_DEPTH,
        MESSAGE_MAX_KEY_UNITS,
        MESSAGE_MAX_NODES,
        MessageAudioPart,
        MessageFilePart,
        MessageImagePart,
        MessagePart,
        MessageRecord,
        MessageTextPart,
        MessageVideoPart,
        ToolCall,
        is_within_message_limits,
        validate_message_records,
    )
    from ._result import (
        Decoded,
        DecodeResult,
        Diagnostic,
        Rejected,
    )
    from ._session import (
        SESSION_PROTOCOL,
        SESSION_VERSION,
        ActiveTurn,
        Confirmation,
        ConfirmationStatus,
        ConversationState,
        Decision,
        SessionSnapshot,
        TerminalTurn,
        decode_session_snapshot,
        encode_session_snapshot,
    )
    from ._text import (
        normalize_knowledge_key,
    )
    from ._turn import (
        TURN_PROTOCOL,
        TURN_PROTOCOL_VERSION,
        DerivedLineage,
        DiagnosticEvent,
        SnapshotEvent,
        SnapshotMessage,
        SnapshotPayload,
        SubmitEvent,
        SubmitLineage,
        SubmitPayload,
        TokenUsage,
        TurnDiagnostic,
        TurnEvent,
        TurnLineage,
        create_snapshot_event,
        decode_turn_event,
        encode_turn_event,
        snapshot_messages,
    )

__all__ = [
    "ANSWER_PROTOCOL",
    "ASK_DIAGNOSTIC_CODES",
    "ASK_ERROR_CASES",
    "ASK_EVENT_MAX_BYTES",
    "ASK_EVENT_MAX_RECORDS",
    "ASK_MAX_SOURCES",
    "ASK_REQUEST_MAX_MESSAGES",
    "ASK_REQUEST_MAX_MESSAGE_CHARS",
    "ASK_REQUEST_PROTOCOL",
    "ASK_REQUEST_VERSION",
    "ASK_SERVICE_PROTOCOL_VERSION",
    "ASSISTANT_CONTENT_MAX_BYTES",
    "ASSISTANT_CONTENT_MAX_RECORDS",
    "ASSISTANT_CONTENT_PREFIX",
    "ASSISTANT_CONTENT_PREFIX_ROOT",
    "BACKEND_INVALID_PAYLOAD",
    "BACKEND_METRIC_NAMES",
    "BACKEND_METRIC_PROTOCOL",
    "BACKEND_METRIC_UNITS",
    "BACKEND_METRIC_UNIT_BY_NAME",
    "BACKEND_METRIC_VERSION",
    "BACKEND_SITE_PROTOCOL",
    "BACKEND_SITE_VERSION",
    "COMPONENT_PROTOCOL",
    "COMPONENT_VERSION",
    "KNOWLEDGE_ENTRY_KINDS",
    "KNOWLEDGE_PROTOCOL",
    "MAX_BOUNDED_ARRAY_ITEMS",
    "MAX_BOUNDED_DEPTH",
    "MAX_BOUNDED_KEY_UNITS",
    "MAX_BOUNDED_NODES",
    "MAX_BOUNDED_OBJECT_KEYS",
    "MAX_BOUNDED_STRING_UNITS",
    "MESSAGE_MAX_CONTAINER_SIZE",
    "MESSAGE_MAX_DEPTH",
    "MESSAGE_MAX_KEY_UNITS",
    "MESSAGE_MAX_NODES",
    "SESSION_PROTOCOL",
    "SESSION_VERSION",
    "SITE_PROTOCOL",
    "TURN_PROTOCOL",
    "TURN_PROTOCOL_VERSION",
    "ActiveTurn",
    "AnswerBody",
    "AnswerEnvelope",
    "AnswerResponse",
    "AskDecodeResult",
    "AskDiagnostic",
    "AskDoneEvent",
    "AskErrorCase",
    "AskErrorEvent",
    "AskEvent",
    "AskEventDecoder",
    "AskEventModel",
    "AskMessage",
    "AskRequest",
    "AskSessionRecord",
    "AskTextEvent",
    "AskToolEvent",
    "AskUsage",
    "AssistantContentDecodeResult",
    "AssistantContentEncoder",
    "AssistantContentPart",
    "BackendMetric",
    "BackendProvenance",
    "BackendSiteAssistant",
    "BackendSiteConfig",
    "BackendSiteCorpus",
    "BackendSiteLimits",
    "BackendSitePersistence",
    "BoundedJson",
    "ChoicesAnswer",
    "Citation",
    "ComponentEvent",
    "ComponentFrame",
    "ComponentInteractEvent",
    "ComponentPart",
    "ComponentSelectEvent",
    "Confidence",
    "Confirmation",
    "ConfirmationStatus",
    "ContentDecoded",
    "ConversationState",
    "Decision",
    "DecodeResult",
    "Decoded",
    "DerivedLineage",
    "DeterministicSiteConfig",
    "Diagnostic",
    "DiagnosticEvent",
    "EscalationAnswer",
    "ExactAnswer",
    "GroundedSource",
    "KnowledgeAnswer",
    "KnowledgeEntry",
    "KnowledgeMatch",
    "LocalKnowledgeArtifact",
    "LocalProvenance",
    "MessageAudioPart",
    "MessageFilePart",
    "MessageImagePart",
    "MessagePart",
    "MessageRecord",
    "MessageTextPart",
    "MessageVideoPart",
    "Rejected",
    "SemanticFallback",
    "SessionSnapshot",
    "SiteArtifactRef",
    "SiteFallback",
    "SnapshotEvent",
    "SnapshotMessage",
    "SnapshotPayload",
    "SubmitEvent",
    "SubmitLineage",
    "SubmitPayload",
    "Suggestion",
    "TerminalTurn",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "TurnDiagnostic",
    "TurnEvent",
    "TurnLineage",
    "TurnSnapshotCursor",
    "canonicalize_local_knowledge_artifact",
    "compute_local_knowledge_artifact_content_hash",
    "create_assistant_content_encoder",
    "create_component_interaction_event",
    "create_component_select_event",
    "create_snapshot_event",
    "create_turn_snapshot_cursor",
    "decode_answer_response",
    "decode_ask_diagnostic",
    "decode_ask_events",
    "decode_ask_request",
    "decode_ask_session_record",
    "decode_ask_usage",
    "decode_assistant_content",
    "decode_backend_metric",
    "decode_backend_site_config",
    "decode_component_frame",
    "decode_deterministic_site_config",
    "decode_grounded_source",
    "decode_local_knowledge_artifact",
    "decode_session_snapshot",
    "decode_turn_event",
    "encode_ask_event",
    "encode_component_event",
    "encode_session_snapshot",
    "encode_turn_event",
    "format_semantic_fallback",
    "is_assistant_content_candidate",
    "is_bounded_json",
    "is_component_frame_candidate",
    "is_safe_href",
    "is_within_message_limits",
    "normalize_knowledge_key",
    "snapshot_messages",
    "validate_answer_envelope",
    "validate_ask_event",
    "validate_message_records",
    "verify_local_knowledge_artifact",
]


#: Where each exported name is defined. A module is imported when one of its names is first
#: used, so a program pays only for the wire families it handles: ``agentskit-chat ask`` never
#: imports the turn, session, message or content models.
_MODULES: _typing.Final[dict[str, str]] = {
    "_answer": (
        "ANSWER_PROTOCOL AnswerBody AnswerEnvelope AnswerResponse BackendProvenance ChoicesAnswer "
        "Confidence EscalationAnswer ExactAnswer LocalProvenance Suggestion decode_answer_response "
        "validate_answer_envelope"
    ),
    "_ask": (
        "ASK_EVENT_MAX_BYTES ASK_EVENT_MAX_RECORDS ASK_SERVICE_PROTOCOL_VERSION AskDoneEvent "
        "AskErrorEvent AskEvent AskEventModel AskTextEvent AskToolEvent encode_ask_event "
        "validate_ask_event"
    ),
    "_ask_errors": "ASK_ERROR_CASES AskErrorCase",
    "_ask_ndjson": "AskDecodeResult AskEventDecoder decode_ask_events",
    "_backend": (
        "ASK_DIAGNOSTIC_CODES ASK_MAX_SOURCES ASK_REQUEST_MAX_MESSAGE_CHARS "
        "ASK_REQUEST_MAX_MESSAGES ASK_REQUEST_PROTOCOL ASK_REQUEST_VERSION BACKEND_INVALID_PAYLOAD "
        "BACKEND_METRIC_NAMES BACKEND_METRIC_PROTOCOL BACKEND_METRIC_UNIT_BY_NAME "
        "BACKEND_METRIC_UNITS BACKEND_METRIC_VERSION BACKEND_SITE_PROTOCOL BACKEND_SITE_VERSION "
        "AskDiagnostic AskMessage AskRequest AskSessionRecord AskUsage BackendMetric "
        "BackendSiteAssistant BackendSiteConfig BackendSiteCorpus BackendSiteLimits "
        "BackendSitePersistence GroundedSource decode_ask_diagnostic decode_ask_request "
        "decode_ask_session_record decode_ask_usage decode_backend_metric "
        "decode_backend_site_config decode_grounded_source"
    ),
    "_bounded": (
        "MAX_BOUNDED_ARRAY_ITEMS MAX_BOUNDED_DEPTH MAX_BOUNDED_KEY_UNITS MAX_BOUNDED_NODES "
        "MAX_BOUNDED_OBJECT_KEYS MAX_BOUNDED_STRING_UNITS BoundedJson is_bounded_json"
    ),
    "_component": (
        "COMPONENT_PROTOCOL COMPONENT_VERSION ComponentEvent ComponentFrame ComponentInteractEvent "
        "ComponentSelectEvent SemanticFallback create_component_interaction_event "
        "create_component_select_event decode_component_frame encode_component_event "
        "format_semantic_fallback is_component_frame_candidate"
    ),
    "_content": (
        "ASSISTANT_CONTENT_MAX_BYTES ASSISTANT_CONTENT_MAX_RECORDS ASSISTANT_CONTENT_PREFIX "
        "ASSISTANT_CONTENT_PREFIX_ROOT AssistantContentDecodeResult AssistantContentEncoder "
        "AssistantContentPart ComponentPart ContentDecoded TextPart "
        "create_assistant_content_encoder decode_assistant_content is_assistant_content_candidate"
    ),
    "_cursor": "TurnSnapshotCursor create_turn_snapshot_cursor",
    "_href": "is_safe_href",
    "_knowledge": (
        "KNOWLEDGE_ENTRY_KINDS KNOWLEDGE_PROTOCOL SITE_PROTOCOL Citation DeterministicSiteConfig "
        "KnowledgeAnswer KnowledgeEntry KnowledgeMatch LocalKnowledgeArtifact SiteArtifactRef "
        "SiteFallback canonicalize_local_knowledge_artifact "
        "compute_local_knowledge_artifact_content_hash decode_deterministic_site_config "
        "decode_local_knowledge_artifact verify_local_knowledge_artifact"
    ),
    "_message": (
        "MESSAGE_MAX_CONTAINER_SIZE MESSAGE_MAX_DEPTH MESSAGE_MAX_KEY_UNITS MESSAGE_MAX_NODES "
        "MessageAudioPart MessageFilePart MessageImagePart MessagePart MessageRecord "
        "MessageTextPart MessageVideoPart ToolCall is_within_message_limits "
        "validate_message_records"
    ),
    "_result": "Decoded DecodeResult Diagnostic Rejected",
    "_session": (
        "SESSION_PROTOCOL SESSION_VERSION ActiveTurn Confirmation ConfirmationStatus "
        "ConversationState Decision SessionSnapshot TerminalTurn decode_session_snapshot "
        "encode_session_snapshot"
    ),
    "_text": "normalize_knowledge_key",
    "_turn": (
        "TURN_PROTOCOL TURN_PROTOCOL_VERSION DerivedLineage DiagnosticEvent SnapshotEvent "
        "SnapshotMessage SnapshotPayload SubmitEvent SubmitLineage SubmitPayload TokenUsage "
        "TurnDiagnostic TurnEvent TurnLineage create_snapshot_event decode_turn_event "
        "encode_turn_event snapshot_messages"
    ),
}
_WHERE: _typing.Final = {
    name: module for module, names in _MODULES.items() for name in names.split()
}


def __getattr__(name: str) -> _typing.Any:
    return _lazy_attribute(__name__, _WHERE, globals(), name)


def __dir__() -> list[str]:
    return sorted(__all__)
