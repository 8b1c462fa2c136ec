"""Loading the reference test vectors (``tests/vectors``, copied from the shared vector set)."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).parent / "vectors"


def expand(node: Any, i: int | None = None) -> Any:
    """Expand the ``$str`` / ``$seq`` template encoding described in the vectors' README."""
    if isinstance(node, str):
        return node.replace("{i}", str(i)) if i is not None else node
    if isinstance(node, list):
        return [expand(x, i) for x in node]
    if isinstance(node, dict):
        if list(node) == ["$str"]:
            return "".join(
                expand(p, i) if isinstance(p, str) else expand(p[0], i) * p[1] for p in node["$str"]
            )
        if list(node) == ["$seq"]:
            out: list[Any] = []
            for seg in node["$seq"]:
                if "each" in seg:
                    out.extend(expand(seg["each"], k) for k in range(seg["from"], seg["to"]))
                else:
                    out.append(expand(seg["one"], i))
            return out
        return {k: expand(v, i) for k, v in node.items()}
    return node


def from_utf16(units: list[int]) -> str:
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")


@cache
def family(name: str) -> dict[str, Any]:
    """The vector file ``name`` with templates expanded and checked against ``input_sha256``."""
    doc: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text("utf-8"))
    for case in doc["cases"]:
        if case.get("templated"):
            case["input"] = expand(case["input"])
            case["expected"] = expand(case["expected"])
            digest = hashlib.sha256(
                json.dumps(case["input"], separators=(",", ":"), ensure_ascii=True).encode()
            ).hexdigest()
            assert digest == case["input_sha256"], case["id"]
        if "input_utf16" in case:
            case["input"] = from_utf16(case["input_utf16"])
        if "payload_utf16" in case:
            case["input"]["payload"] = from_utf16(case["payload_utf16"])
    return doc


def cases(name: str) -> list[Any]:
    """``pytest.param`` values for every case of a family, with the case id as the test id."""
    return [pytest.param(case, id=case["id"]) for case in family(name)["cases"]]


def as_doubles(value: Any) -> Any:
    """Compare numbers as IEEE doubles, as the vectors' README asks."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:
            return float("inf") if value > 0 else float("-inf")
    if isinstance(value, dict):
        return {k: as_doubles(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_doubles(v) for v in value]
    return value


def sorted_sha256(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    ).hexdigest()
