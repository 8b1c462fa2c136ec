"""The Snowball English stemmer, loaded without the algorithms of thirty other languages.

``snowballstemmer.stemmer("english")`` first imports the ``snowballstemmer`` package, whose
``__init__`` imports the generated algorithm of every language it ships: tens of milliseconds of
every start of the command line and the server, for one language used. Here the package's folder
is found without running its ``__init__``, and only ``english_stemmer`` (with its helpers
``basestemmer`` and ``among``) is imported from it, as modules of a private package, so the
stems are the very same. Should that layout ever change, the package's own way is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Final, Protocol

__all__ = ["Stemmer", "english_stemmer", "source_files"]

#: The private package name the English algorithm's modules are imported under.
_PACKAGE: Final = "agentskit_chat._snowball"


class Stemmer(Protocol):
    """What a Snowball stemmer offers: one word's stem."""

    def stemWord(self, word: str) -> str:
        """The stem of ``word``."""
        ...


def _english_alone() -> Stemmer:
    package = sys.modules.get(_PACKAGE)
    if package is None:
        spec = importlib.util.find_spec("snowballstemmer")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("snowballstemmer is not a package of modules")
        package = types.ModuleType(_PACKAGE)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_PACKAGE] = package
    module = importlib.import_module(f"{_PACKAGE}.english_stemmer")
    stemmer: Stemmer = module.EnglishStemmer()
    return stemmer


def english_stemmer() -> Stemmer:
    """A Snowball English stemmer (``snowballstemmer.stemmer("english")``), loaded alone."""
    try:
        return _english_alone()
    except (ImportError, AttributeError):
        sys.modules.pop(_PACKAGE, None)
        import snowballstemmer  # noqa: PLC0415 - only when the fast way is not available

        stemmer: Stemmer = snowballstemmer.stemmer("english")
        return stemmer


def source_files(stemmer: Stemmer) -> tuple[Path, ...]:
    """The files of ``stemmer``'s algorithm and of the helpers it runs on: what its stems are
    made by (a cache of stems names them in its key)."""
    module = sys.modules.get(type(stemmer).__module__)
    where = getattr(module, "__file__", None)
    if where is None:
        return ()
    folder = Path(where).parent
    return tuple(folder / name for name in ("among.py", "basestemmer.py", Path(where).name))
