"""Regenerate ``src/agentskit_chat/protocol/_unicode_case.py``.

The reference lower-cases with ICU (Unicode 17). Python 3.11's ``str.lower()`` uses Unicode 14.
This script asks Node.js (whose ICU carries the reference's tables) for:

- the lower-case mapping of every code point, recording the ones Python gets differently;
- the ``Cased`` and ``Case_Ignorable`` properties (``\\p{Cased}``, ``\\p{Case_Ignorable}``),
  which decide the final-sigma context, as compact range tables.

Before writing anything it checks the property tables two ways, and stops on any mismatch:

- ``Case_Ignorable`` must equal its Unicode definition rebuilt from ``unicodedata2`` 17
  (general categories Mn, Me, Cf, Lm, Sk plus the Word_Break MidLetter, MidNumLet and
  Single_Quote characters), and ``Cased`` must contain every Ll, Lu and Lt character;
- ICU's own final-sigma decision in the contexts ``XΣ``, ``AXΣ`` and ``AΣX``, for every code
  point ``X``, must be what the tables predict.

Run: ``python scripts/gen_unicode_case.py`` (needs ``node`` and the project's virtualenv).
"""

from __future__ import annotations

import json
import subprocess
import sys
from bisect import bisect_right
from pathlib import Path

import unicodedata2

JS = r"""
const lower = {};
const cased = [], ignorable = [];
const finalXS = [], finalAXS = [], finalASX = [];
const isCased = /^\p{Cased}$/u, isIgnorable = /^\p{Case_Ignorable}$/u;
for (let cp = 0; cp <= 0x10FFFF; cp++) {
  if (cp >= 0xD800 && cp <= 0xDFFF) continue;
  const s = String.fromCodePoint(cp);
  const l = s.toLocaleLowerCase('en-US');
  if (l !== s) lower[cp] = l;
  if (isCased.test(s)) cased.push(cp);
  if (isIgnorable.test(s)) ignorable.push(cp);
  if (('' + s + '\u03A3').toLocaleLowerCase('en-US').endsWith('\u03C2')) finalXS.push(cp);
  if (('A' + s + '\u03A3').toLocaleLowerCase('en-US').endsWith('\u03C2')) finalAXS.push(cp);
  if (('A\u03A3' + s).toLocaleLowerCase('en-US')[1] === '\u03C2') finalASX.push(cp);
}
process.stdout.write(JSON.stringify({
  unicode: process.versions.unicode, icu: process.versions.icu, node: process.versions.node,
  lower, cased, ignorable, finalXS, finalAXS, finalASX,
}));
"""

TARGET = Path(__file__).resolve().parents[1] / "src/agentskit_chat/protocol/_unicode_case.py"

# Word_Break MidLetter, MidNumLet and Single_Quote (WordBreakProperty.txt); unicodedata has no
# Word_Break, and these sets have not changed since Unicode 6.3.
WORD_BREAK_IGNORABLE = frozenset(
    {
        *(0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2027, 0xFE13, 0xFE55, 0xFF1A),  # MidLetter
        *(0x002E, 0x2018, 0x2019, 0x2024, 0xFE52, 0xFF07, 0xFF0E),  # MidNumLet
        0x0027,  # Single_Quote
    }
)
IGNORABLE_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Lm", "Sk"})


def ranges(points: list[int]) -> list[tuple[int, int]]:
    """Sorted code points as inclusive ``(first, last)`` runs."""
    out: list[tuple[int, int]] = []
    for cp in sorted(points):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def member(table: list[tuple[int, int]], cp: int) -> bool:
    starts = [first for first, _ in table]
    i = bisect_right(starts, cp) - 1
    return i >= 0 and table[i][0] <= cp <= table[i][1]


def check(data: dict[str, object]) -> None:
    cased = set(data["cased"])  # type: ignore[call-overload]
    ignorable = set(data["ignorable"])  # type: ignore[call-overload]
    problems: list[str] = []
    derived = {
        cp
        for cp in range(0x110000)
        if not 0xD800 <= cp <= 0xDFFF
        and (unicodedata2.category(chr(cp)) in IGNORABLE_CATEGORIES or cp in WORD_BREAK_IGNORABLE)
    }
    if derived != ignorable:
        problems.append(
            f"Case_Ignorable differs from its definition: ICU only {sorted(ignorable - derived)}, "
            f"unicodedata2 only {sorted(derived - ignorable)}"
        )
    letters = {cp for cp in range(0x110000) if unicodedata2.category(chr(cp)) in ("Ll", "Lu", "Lt")}
    if not letters <= cased:
        problems.append(f"Cased misses letters: {sorted(letters - cased)}")

    def preceded(cp: int, after_a: bool) -> bool:
        # The cased letter before Σ, skipping case-ignorable characters.
        if cp in ignorable:
            return after_a
        return cp in cased

    def followed(cp: int) -> bool:
        return cp not in ignorable and cp in cased

    points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    predictions = {
        "finalXS": {cp for cp in points if preceded(cp, False)},
        "finalAXS": {cp for cp in points if preceded(cp, True)},
        "finalASX": {cp for cp in points if not followed(cp)},
    }
    for name, predicted in predictions.items():
        actual = set(data[name])  # type: ignore[call-overload]
        if actual != predicted:
            problems.append(
                f"{name}: ICU final sigma only for {sorted(actual - predicted)[:20]}, "
                f"tables only for {sorted(predicted - actual)[:20]}"
            )
    if problems:
        sys.exit("\n".join(problems))


def table_text(name: str, doc: str, runs: list[tuple[int, int]]) -> str:
    body = "\n".join(f"    (0x{first:04X}, 0x{last:04X})," for first, last in runs)
    return f"#: {doc}\n{name}: Final[tuple[tuple[int, int], ...]] = (\n{body}\n)\n"


def main() -> None:
    raw = subprocess.run(["node", "-e", JS], check=True, capture_output=True, text=True).stdout
    data = json.loads(raw)
    check(data)
    delta = {int(cp): low for cp, low in data["lower"].items() if chr(int(cp)).lower() != low}
    unchanged = [cp for cp in delta if chr(cp).lower() != chr(cp)]
    if unchanged:
        sys.exit(f"Python maps these differently, not just missing: {unchanged}")
    # ``ascii()`` quoted the ruff way (no value holds a quote character).
    lines = "\n".join(f'    0x{cp:04X}: "{ascii(low)[1:-1]}",' for cp, low in sorted(delta.items()))
    cased = ranges(data["cased"])
    ignorable = ranges(data["ignorable"])
    TARGET.write_text(
        f'"""Case data of Unicode {data["unicode"]} (the reference\'s tables) that Python 3.11\'s '
        "Unicode 14 lacks.\n\n"
        "Generated by ``scripts/gen_unicode_case.py`` from the ICU tables of Node.js "
        f"{data['node']} (ICU {data['icu']}):\n\n"
        '- ``LOWER_DELTA``: ``String.prototype.toLocaleLowerCase("en-US")`` compared with '
        "``str.lower()``\n"
        "  for every code point; each key is a character that ``str.lower()`` leaves unchanged.\n"
        "- ``CASED`` and ``CASE_IGNORABLE``: the ``Cased`` and ``Case_Ignorable`` properties "
        "that decide\n"
        "  the final-sigma context, as sorted inclusive ``(first, last)`` code point runs.\n"
        '"""\n\nfrom __future__ import annotations\n\nfrom typing import Final\n\n'
        f"LOWER_DELTA: Final[dict[int, str]] = {{\n{lines}\n}}\n\n"
        + table_text("CASED", "Code points with the Cased property.", cased)
        + "\n"
        + table_text("CASE_IGNORABLE", "Code points with the Case_Ignorable property.", ignorable)
    )


if __name__ == "__main__":
    main()
