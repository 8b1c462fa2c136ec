"""Names a package imports when they are first used, for the packages that defer imports.

A package keeps a table of its deferred names (name → module, relative to the package) and
answers a missing attribute from it::

    def __getattr__(name: str) -> Any:
        return lazy_attribute(__name__, _LAZY, globals(), name)

so that importing the package costs only the modules its everyday names need.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_attribute"]


def lazy_attribute(
    package: str, where: Mapping[str, str], namespace: MutableMapping[str, Any], name: str
) -> Any:
    """``name`` of ``package``, imported from its module ``where[name]`` (``.module`` or
    ``module``, relative to ``package``) and kept in ``namespace`` (the package's globals), so
    that the next lookup finds it there.

    Raises:
        AttributeError: ``package`` has no such name.
    """
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    relative = module if module.startswith(".") else f".{module}"
    value = getattr(importlib.import_module(relative, package), name)
    namespace[name] = value
    return value
