"""The closed component registry: the manifest, frame resolution, events, fallbacks, message
presentation, the twelve standard components and the semantic theme.

A render frame reaches a renderer only when its key is registered in the chat's manifest and
its props validate against that component's schema; anything else is an inert diagnostic with
a text fallback.
"""

from __future__ import annotations

from ._definition import (
    COMPONENT_KEY_PATTERN,
    ComponentAccessibility,
    ComponentCapability,
    ComponentDefinition,
    ComponentEventSpec,
    EventValueKind,
    FallbackBuilder,
    LiveRegion,
)

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
