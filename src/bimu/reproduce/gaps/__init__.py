"""Gaps between a reproduced number and the paper's, in standard deviations, and their explanations.

A full-scale table cell on real data whose mean over seeds lies more than :data:`GAP_SD` standard
deviations from the paper's number is marked ``†`` and listed under the table with the explanation
recorded in :data:`EXPLANATIONS` (or "not explained yet"). The standard deviation is that of the
difference of the two means, ``sqrt(sd_paper**2 + sd_ours**2)``, from whichever of the two is reported
(the paper's "m ± s", the sample std of our seeds); a cell with neither is not judged.

The explanations are the markdown files of this folder (package data). A file opens with the cells it
explains, one ``- ENTRY ROW QUANTITY`` line each (anything after is a comment) under ``explains:``,
then a blank line and the text, wrapped at will (lines are joined with single spaces). ``{{name}}``
inserts the text of ``_name.md``, a passage shared by several explanations.

>>> parse_reported("90.30 ± 0.38"), parse_reported("139.47"), parse_reported("-")
((90.3, 0.38), (139.47, None), None)
>>> round(gap_sd([92.1, 92.5], (90.30, 0.38)), 1)  # |92.3 - 90.3| / sqrt(0.38^2 + 0.28^2)
4.2
>>> gap_sd([92.1], (90.30, None)) is None  # one seed and no std in the paper: not judged
True
>>> explanation("memory-window", "bayesbinn-exact-ratio", "acc")[:40]
'cause found: the exact mu-gradient ratio'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from importlib import resources

GAP_SD = 2.0
"""A gap larger than this many standard deviations is marked and must be explained."""

_INCLUDE = re.compile(r"\{\{([a-z0-9-]+)\}\}")


def _text(name: str) -> str:
    return (resources.files(__name__) / f"{name}.md").read_text(encoding="utf-8")


def _join(lines: Sequence[str]) -> str:
    body = " ".join(line.strip() for line in lines if line.strip())
    return _INCLUDE.sub(lambda m: _join(_text("_" + m.group(1)).splitlines()), body)


def load_explanations() -> dict[tuple[str, str, str], str]:
    """``(entry, row slug, quantity) -> text`` from this folder's markdown files (see the module)."""
    out = {}
    for f in sorted(resources.files(__name__).iterdir(), key=lambda f: f.name):
        if not f.name.endswith(".md") or f.name.startswith("_"):
            continue
        lines = f.read_text(encoding="utf-8").splitlines()
        if not lines or lines[0].strip() != "explains:":
            raise ValueError(f"gap explanation {f.name}: the first line must be 'explains:'")
        end = lines.index("") if "" in lines else len(lines)
        text = _join(lines[end:])
        for line in lines[1:end]:
            entry, slug, quantity = line.removeprefix("- ").split()[:3]
            out[(entry, slug, quantity)] = text
    return out


EXPLANATIONS: dict[tuple[str, str, str], str] = load_explanations()
"""``(entry, row slug, quantity) -> explanation`` of a marked gap: the cause found, or what was tried
while it stays open. Filled as full-scale results come in; the tables print it under the gap."""

_REPORTED = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:±\s*(\d+(?:\.\d+)?))?\s*$")


def parse_reported(cell: str) -> tuple[float, float | None] | None:
    """``"m ± s"`` -> ``(m, s)``, ``"m"`` -> ``(m, None)``; ``None`` for anything else ("-", "n/a").

    A printed std is only known to its last digit: ``s`` is at least half a unit of that digit, so the
    paper's "0.99 ± 0.00" (a std below 0.005) is not read as an exact zero.

    >>> parse_reported("0.99 ± 0.00"), parse_reported("90.30 ± 0.38"), parse_reported("12 ± 0")
    ((0.99, 0.005), (90.3, 0.38), (12.0, 0.5))
    """
    m = _REPORTED.match(str(cell))
    if not m:
        return None
    if m.group(2) is None:
        return float(m.group(1)), None
    digits = len(m.group(2).partition(".")[2])
    return float(m.group(1)), max(float(m.group(2)), 0.5 * 10.0 ** -digits)


def gap_sd(ours: Sequence[float], paper: tuple[float, float | None]) -> float | None:
    """``|mean(ours) - paper mean|`` over the standard deviation of the difference (see the module);
    ``None`` when neither side has a standard deviation or it is zero, or ``ours`` is empty."""
    vals = [float(v) for v in ours if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    mean = sum(vals) / len(vals)
    sd_ours = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    sd = math.hypot(paper[1] or 0.0, sd_ours)
    if sd == 0.0:
        return None
    return abs(mean - paper[0]) / sd


def explanation(entry: str, slug: str, quantity: str) -> str:
    """The recorded explanation of a marked gap, or ``"not explained yet"``."""
    return EXPLANATIONS.get((entry, slug, quantity), "not explained yet")
