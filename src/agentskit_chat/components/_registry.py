"""The closed component manifest and everything resolved against it: frames, choices,
interactions and fallbacks.

Resolution never raises on what a model, a store or a client sent: an unregistered key or
props that fail the component's schema come back as a typed diagnostic, so an unknown frame
can only ever be shown as its text fallback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import (
    ComponentFrame,
    ComponentInteractEvent,
    ComponentSelectEvent,
    Diagnostic,
    SemanticFallback,
    create_component_interaction_event,
    create_component_select_event,
    decode_component_frame,
)
from agentskit_chat.protocol._bounded import is_bounded_json
from agentskit_chat.protocol._types import is_safe_id, thaw

from ._definition import COMPONENT_KEY_PATTERN, ComponentDefinition
from ._interaction import ABSENT, validate_standard_component_interaction
from ._standard import CHOICE_LIST_COMPONENT_KEY, STANDARD_COMPONENT_CATALOG
from ._standard_props import ChoiceAction, ChoiceListProps

__all__ = [
    "STANDARD_COMPONENT_MANIFEST",
    "ComponentManifest",
    "ComponentResolution",
    "ResolvedComponent",
    "UnresolvedComponent",
    "create_component_interaction",
    "define_component_manifest",
    "parse_semantic_fallback",
    "resolve_choice_action",
    "resolve_choice_list_frame",
    "resolve_component_fallback",
    "resolve_component_frame",
    "select_choice",
]

_KEY: Final = re.compile(COMPONENT_KEY_PATTERN[1:-1])
_MANIFEST_INVALID: Final = (
    "Component manifest keys must be non-empty, unique, and must not override standard "
    "catalog keys."
)
_NOT_CHOICE_LIST: Final = "Selection frame is not a ChoiceList."
_NOT_A_CHOICE: Final = "Selected choice is not present in the ChoiceList."
_UNDECLARED: Final = "Component interaction is not declared by the resolved component."
_UNKNOWN = Diagnostic("COMPONENT_UNKNOWN", "Component is not registered.")
_INVALID_PROPS = Diagnostic("COMPONENT_INVALID_PROPS", "Component props are invalid.")
_NOT_CHOICE = Diagnostic("COMPONENT_UNKNOWN", "Component is not a ChoiceList.")
_INVALID_CHOICE_PROPS = Diagnostic("COMPONENT_INVALID_PROPS", "ChoiceList props are invalid.")
_STANDARD: Final = {definition.key: definition for definition in STANDARD_COMPONENT_CATALOG}


class ComponentManifest(Mapping[str, ComponentDefinition]):
    """The closed set of components a chat renders: component key → definition, read-only.

    Only the keys it was built with are registered; nothing is inherited. Build one with
    :func:`define_component_manifest`.
    """

    __slots__ = ("_definitions",)

    def __init__(self, definitions: Mapping[str, ComponentDefinition]) -> None:
        self._definitions = MappingProxyType(dict(definitions))

    def __getitem__(self, key: str) -> ComponentDefinition:
        return self._definitions[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    def __repr__(self) -> str:
        return f"ComponentManifest({list(self._definitions)!r})"


def define_component_manifest(
    components: Iterable[ComponentDefinition] | Mapping[str, ComponentDefinition],
) -> ComponentManifest:
    """The manifest of ``components`` (definitions, or a mapping key → definition).

    Each key must match ``^[a-z][a-z0-9-]{0,63}$`` and be unique; a standard key
    (``choice-list``, ...) must be the catalog's own definition, so no chat can change what a
    standard component accepts.

    Raises:
        ConfigurationError: "Component manifest keys must be non-empty, unique, and must not
            override standard catalog keys." (also for anything that is not a definition, or a
            mapping key that is not its definition's key).

    Example:
        >>> from agentskit_chat.components import CHOICE_LIST_COMPONENT, define_component_manifest
        >>> manifest = define_component_manifest([CHOICE_LIST_COMPONENT])
        >>> list(manifest)
        ['choice-list']
    """
    if isinstance(components, Mapping):
        pairs = list(components.items())
    else:
        try:
            pairs = [(getattr(item, "key", None), item) for item in components]
        except TypeError:
            raise ConfigurationError(_MANIFEST_INVALID) from None
    definitions: dict[str, ComponentDefinition] = {}
    for key, definition in pairs:
        if (
            not isinstance(definition, ComponentDefinition)
            or type(key) is not str
            or key != definition.key
            or _KEY.fullmatch(key) is None
            or key in definitions
            or (key in _STANDARD and _STANDARD[key] is not definition)
        ):
            raise ConfigurationError(_MANIFEST_INVALID)
        definitions[key] = definition
    return ComponentManifest(definitions)


#: The twelve standard components; a chat that declares no manifest of its own uses it.
STANDARD_COMPONENT_MANIFEST: Final = define_component_manifest(STANDARD_COMPONENT_CATALOG)


@dataclass(frozen=True, slots=True)
class ResolvedComponent:
    """A frame that may be rendered: its component is registered and its props are valid.

    Attributes:
        frame: The decoded frame.
        definition: The registered component.
        props: The props validated by the component's schema (an instance of it).
    """

    frame: ComponentFrame
    definition: ComponentDefinition
    props: BaseModel

    ok: bool = True

    @property
    def fallback_text(self) -> str:
        """The definition's summary of the props, else the frame's own fallback formatted."""
        builder = self.definition.fallback
        if builder is not None:
            try:
                return builder(self.props)
            except Exception:
                pass
        return format_fallback(self.frame.fallback)


@dataclass(frozen=True, slots=True)
class UnresolvedComponent:
    """A frame that must not reach a renderer, and why.

    Attributes:
        diagnostic: ``COMPONENT_INVALID_FRAME``, ``COMPONENT_UNSUPPORTED_VERSION``,
            ``COMPONENT_UNKNOWN_TYPE``, ``COMPONENT_UNKNOWN`` or ``COMPONENT_INVALID_PROPS``.
        frame: The decoded frame when the envelope itself was valid (its fallback can then be
            shown), else ``None``.
    """

    diagnostic: Diagnostic
    frame: ComponentFrame | None = None

    ok: bool = False


#: What :func:`resolve_component_frame` returns.
ComponentResolution = ResolvedComponent | UnresolvedComponent


def format_fallback(fallback: SemanticFallback) -> str:
    """``[unsupported visual: <kind>] <summary>``."""
    return f"[unsupported visual: {fallback.kind}] {fallback.summary}"


def _validate(schema: type[BaseModel], props: Any) -> BaseModel | None:
    try:
        return schema.model_validate(thaw(props))
    except Exception:
        return None


def resolve_component_frame(frame: object, manifest: ComponentManifest) -> ComponentResolution:
    """Resolve ``frame`` (a frame, its JSON text, or wire data) against ``manifest``.

    Never raises. The envelope's own diagnostics pass through; an unregistered key is
    ``COMPONENT_UNKNOWN`` ("Component is not registered."); props the component's schema
    rejects are ``COMPONENT_INVALID_PROPS`` ("Component props are invalid.").
    """
    if isinstance(frame, ComponentFrame):
        decoded: ComponentFrame = frame
    else:
        result = decode_component_frame(frame)
        if not result.ok or result.value is None:
            assert result.diagnostic is not None
            return UnresolvedComponent(result.diagnostic)
        decoded = result.value
    definition = manifest.get(decoded.component_key) if isinstance(manifest, Mapping) else None
    if definition is None:
        return UnresolvedComponent(_UNKNOWN, decoded)
    props = _validate(definition.props_schema, decoded.props)
    if props is None:
        return UnresolvedComponent(_INVALID_PROPS, decoded)
    return ResolvedComponent(decoded, definition, props)


def resolve_choice_list_frame(frame: object, manifest: ComponentManifest) -> ComponentResolution:
    """As :func:`resolve_component_frame`, for a frame that must be a choice list
    (``COMPONENT_UNKNOWN`` "Component is not a ChoiceList." otherwise). Never raises."""
    resolution = resolve_component_frame(frame, manifest)
    if not isinstance(resolution, ResolvedComponent):
        return resolution
    if resolution.frame.component_key != CHOICE_LIST_COMPONENT_KEY:
        return UnresolvedComponent(_NOT_CHOICE, resolution.frame)
    if not isinstance(resolution.props, ChoiceListProps):
        return UnresolvedComponent(_INVALID_CHOICE_PROPS, resolution.frame)
    return resolution


def resolve_component_fallback(frame: object, manifest: ComponentManifest) -> str | None:
    """The component's own summary of a resolved frame's props; ``None`` when the frame does
    not resolve or its component has no summary builder. Never raises."""
    resolution = resolve_component_frame(frame, manifest)
    if not isinstance(resolution, ResolvedComponent) or resolution.definition.fallback is None:
        return None
    try:
        return resolution.definition.fallback(resolution.props)
    except Exception:
        return None


def parse_semantic_fallback(value: object) -> SemanticFallback:
    """A semantic fallback ``{kind: 1..64, summary: 1..4096}`` (extra keys dropped).

    Raises:
        pydantic.ValidationError: when ``value`` is not one.
    """
    return SemanticFallback.model_validate(value)


def _choice_list(
    frame: ComponentFrame | Mapping[str, Any],
) -> tuple[ComponentFrame, ChoiceListProps]:
    decoded = frame if isinstance(frame, ComponentFrame) else ComponentFrame.model_validate(frame)
    if decoded.component_key != CHOICE_LIST_COMPONENT_KEY:
        raise ConfigurationError(_NOT_CHOICE_LIST)
    return decoded, ChoiceListProps.model_validate(thaw(decoded.props))


def select_choice(
    frame: ComponentFrame | Mapping[str, Any], choice_id: str
) -> ComponentSelectEvent:
    """The ``select`` event of choice ``choice_id`` in choice-list ``frame``.

    Raises:
        ConfigurationError: "Selection frame is not a ChoiceList." or "Selected choice is not
            present in the ChoiceList."
        pydantic.ValidationError: the frame's props are not valid choice-list props.
    """
    decoded, props = _choice_list(frame)
    if not any(choice.id == choice_id for choice in props.choices):
        raise ConfigurationError(_NOT_A_CHOICE)
    return create_component_select_event(decoded, choice_id)


def resolve_choice_action(
    frame: ComponentFrame | Mapping[str, Any], choice_id: str
) -> ChoiceAction | None:
    """The action choice ``choice_id`` carries, or ``None`` (no action, or no such choice).

    Raises:
        ConfigurationError: "Selection frame is not a ChoiceList."
        pydantic.ValidationError: the frame's props are not valid choice-list props.
    """
    _, props = _choice_list(frame)
    for choice in props.choices:
        if choice.id == choice_id:
            return choice.action
    return None


def _portable_url(value: object) -> bool:
    if type(value) is not str or "\\" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    if value.startswith("/"):
        return not value.startswith("//")
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and parts.username is None
        and parts.password is None
    )


def _custom_value_valid(kind: str, value: object) -> bool:
    if kind == "none":
        return value is ABSENT
    if kind == "id":
        return is_safe_id(value)
    if kind == "url":
        return _portable_url(value)
    if kind == "form":
        return isinstance(value, Mapping)
    return False


def create_component_interaction(
    frame: object, manifest: ComponentManifest, event: str, value: object = ABSENT
) -> ComponentInteractEvent:
    """The ``interact`` event ``event`` (with ``value``, if given) of a resolved frame.

    A standard component's interaction must pass
    :func:`~agentskit_chat.components.validate_standard_component_interaction`; a custom one's
    value must fit the event's declared kind (``none``: no value; ``id``: a safe identifier;
    ``url``: root-relative or http(s) without credentials; ``form``: an object). Choice lists
    never interact (they select, see :func:`select_choice`). Leave ``value`` out for no value;
    ``None`` is JSON ``null``.

    Raises:
        ConfigurationError: "Component interaction is not declared by the resolved component."
            (the frame does not resolve, the event is not declared, or the value is invalid).
    """
    resolution = resolve_component_frame(frame, manifest)
    if not isinstance(resolution, ResolvedComponent):
        raise ConfigurationError(_UNDECLARED)
    definition = resolution.definition
    spec = definition.event(event) if type(event) is str else None
    if spec is None or definition.key == CHOICE_LIST_COMPONENT_KEY:
        raise ConfigurationError(_UNDECLARED)
    if value is not ABSENT and not is_bounded_json(value):
        raise ConfigurationError(_UNDECLARED)
    if _STANDARD.get(definition.key) is definition:
        valid = validate_standard_component_interaction(
            definition.key, resolution.props, event, value
        )
    else:
        valid = _custom_value_valid(spec.value, value)
    if not valid:
        raise ConfigurationError(_UNDECLARED)
    try:
        if value is ABSENT:
            return create_component_interaction_event(resolution.frame, event)
        return create_component_interaction_event(resolution.frame, event, value)
    except Exception:
        raise ConfigurationError(_UNDECLARED) from None
