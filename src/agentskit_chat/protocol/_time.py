"""Timestamps: the protocol's ISO date-time grammar and JavaScript ``Date.parse`` arithmetic.

``datetime`` cannot hold year 0000 and overflows near 9999 with offsets, so days are counted
arithmetically on the proleptic Gregorian calendar.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["epoch_ms", "is_message_timestamp", "is_timestamp"]

_TIMESTAMP: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))"
)
_MESSAGE_TIMESTAMP: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.[0-9]{3}Z"
)
_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _valid_date(year: int, month: int, day: int) -> bool:
    if not 1 <= month <= 12 or day < 1:
        return False
    limit = 29 if month == 2 and _is_leap(year) else _DAYS_IN_MONTH[month - 1]
    return day <= limit


def _match(value: str) -> re.Match[str] | None:
    m = _TIMESTAMP.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    if not _valid_date(year, month, day) or hour > 23 or minute > 59 or second > 59:
        return None
    if m.group(8) is not None and (int(m.group(9)) > 23 or int(m.group(10)) > 59):
        return None
    return m


def is_timestamp(value: str) -> bool:
    """Whether ``value`` is ``YYYY-MM-DDTHH:MM[:SS[.fraction]]`` with ``Z`` or ``±HH:MM``."""
    return _match(value) is not None


def is_message_timestamp(value: str) -> bool:
    """Whether ``value`` is exactly ``YYYY-MM-DDTHH:MM:SS.sssZ`` naming a real instant."""
    m = _MESSAGE_TIMESTAMP.fullmatch(value)
    if m is None:
        return False
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    return _valid_date(year, month, day) and hour <= 23 and minute <= 59 and second <= 59


def _days_from_civil(year: int, month: int, day: int) -> int:
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def epoch_ms(value: str) -> int:
    """Epoch milliseconds as ``Date.parse`` computes them (fraction truncated to 3 digits).

    Raises:
        ValueError: when ``value`` is not a protocol timestamp.
    """
    m = _match(value)
    if m is None:
        raise ValueError("not a timestamp")
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    millis = int((m.group(7) or "").ljust(3, "0")[:3])
    total = (
        ((_days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second
    ) * 1000 + millis
    if m.group(8) is not None:
        offset = (int(m.group(9)) * 60 + int(m.group(10))) * 60_000
        total += -offset if m.group(8) == "+" else offset
    return total
