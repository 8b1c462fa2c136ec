"""What a component is: its key, props schema, events, accessibility, capabilities, fallback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel

__all__ = [
    "COMPONENT_KEY_PATTERN",
    "ComponentAccessibility",
    "ComponentCapability",
    "ComponentDefinition",
    "ComponentEventSpec",
    "EventValueKind",
    "FallbackBuilder",
    "LiveRegion",
]

#: A component key (and an event name): lower-case ASCII letter, then up to 63 of ``a-z0-9-``.
COMPONENT_KEY_PATTERN: Final = r"^[a-z][a-z0-9-]{0,63}$"

#: What an event carries: nothing, a safe identifier, a form's values, or a portable URL.
EventValueKind = Literal["none", "id", "form", "url"]
#: How a screen reader is told about changes.
LiveRegion = Literal["none", "polite", "assertive"]
#: What a component can do; a host may refuse components whose capabilities it does not offer.
ComponentCapability = Literal[
    "display", "selection", "input", "action", "navigation", "progress", "download"
]
#: Builds the plain-text summary of validated props (the component's props model instance).
FallbackBuilder = Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class ComponentEventSpec:
    """An event a component declares: its name and the kind of value it carries.

    Attributes:
        name: Matches :data:`COMPONENT_KEY_PATTERN`.
        value: See :data:`EventValueKind`.
    """

    name: str
    value: EventValueKind = "none"


@dataclass(frozen=True, slots=True)
class ComponentAccessibility:
    """How assistive technology sees a component.

    Attributes:
        role: The ARIA role (``group``, ``form``, ``progressbar``, ...).
        keyboard: Whether it can be operated by keyboard alone.
        live: See :data:`LiveRegion`.
    """

    role: str
    keyboard: bool = False
    live: LiveRegion = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentDefinition:
    """One component a chat can render. Definitions are immutable.

    Attributes:
        key: The component key frames name (:data:`COMPONENT_KEY_PATTERN`).
        props_schema: The pydantic model its props must validate against (it also emits the
            props' JSON Schema, for tool-calling models).
        events: The events it may emit, in declaration order.
        accessibility: How assistive technology sees it, if declared.
        capabilities: What it can do, in declaration order.
        fallback: Builds a plain-text summary of its validated props, if it has one.
    """

    key: str
    props_schema: type[BaseModel]
    events: tuple[ComponentEventSpec, ...] = ()
    accessibility: ComponentAccessibility | None = None
    capabilities: tuple[ComponentCapability, ...] = ()
    fallback: FallbackBuilder | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        object.__setattr__(self, "capabilities", tuple(self.capabilities))

    def event(self, name: str) -> ComponentEventSpec | None:
        """The declared event called ``name``, or ``None``."""
        for spec in self.events:
            if spec.name == name:
                return spec
        return None
