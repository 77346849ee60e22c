"""Gaps between a reproduced number and the paper's, in standard deviations, and their explanations.

A full-scale table cell on real data whose mean over seeds lies more than :data:`GAP_SD` standard
deviations from the paper's number is marked ``†`` and listed under the table with the explanation
recorded in :data:`EXPLANATIONS` (or "not explained yet").

The rule: both numbers are means, the paper's over :data:`bimu.paper.RUNS` runs (its "m ± s", ``s``
the std of those runs), ours over ``n`` seeds (``s_ours`` their sample std, ``ddof=1``). The standard
deviation of the difference of two independent means is
``sqrt(s_paper**2 / RUNS + s_ours**2 / n)``, and the gap is ``|mean_ours - m| / that``: a gap above 2
says the two means differ by more than their own sampling noise allows. With one seed (no ``s_ours``)
only the paper's term remains; a cell with neither std is not judged. The ± of the paper's
Permuted-MNIST OOD AUC is, in its code, a spread over the tasks of one run; it is the only spread the
paper gives for that column and is used like the others.

The explanations are the markdown files of this folder (package data), one file per cause. A file
opens with the cells it explains, one ``- ENTRY ROW QUANTITY`` line each (anything after is a
comment) under ``explains:``, then a blank line and the text, wrapped at will (lines are joined with
single spaces). ``{{name}}`` refers to ``_name.md``, a passage shared by several causes: it is written
once on a page and each referring text points at it (:func:`passage_ids`).

>>> parse_reported("90.30 ± 0.38"), parse_reported("139.47"), parse_reported("-")
((90.3, 0.38), (139.47, None), None)
>>> round(gap_sd([92.1, 92.5], (90.30, 0.38)), 2)  # 2.0 / sqrt(0.38^2 / 5 + 0.2828^2 / 2)
7.62
>>> gap_sd([92.1], (90.30, None)) is None  # one seed and no std in the paper: not judged
True
>>> explanation("memory-window", "bayesbinn-exact-ratio", "acc")[0]
'bayesbinn-exact-ratio'
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from importlib import resources

from bimu.paper import RUNS

GAP_SD = 2.0
"""A gap larger than this many standard deviations is marked and must be explained."""

RULE = (f"more than {GAP_SD:g} standard deviations of the difference of the two means from the paper: "
        f"|ours - paper| / sqrt(sd_paper^2 / {RUNS} + sd_ours^2 / n), the paper's mean over its {RUNS} runs, "
        "ours over our n seeds (sample std)")
"""How a † is decided, as the tables state it under the marks."""

_INCLUDE = re.compile(r"\{\{([a-z0-9-]+)\}\}")


def _text(name: str) -> str:
    return (resources.files(__name__) / f"{name}.md").read_text(encoding="utf-8")


def _join(lines: Sequence[str]) -> str:
    body = " ".join(line.strip() for line in lines if line.strip())
    return _INCLUDE.sub(lambda m: f"(see [{m.group(1)}](#gap-{m.group(1)}))", body)


def passage_ids(text: str) -> list[str]:
    """The shared passages an explanation refers to, in order (``(see [NAME](#gap-NAME))``).

    >>> passage_ids("a (see [synmeta-norm](#gap-synmeta-norm)) b")
    ['synmeta-norm']
    """
    return re.findall(r"\(see \[([a-z0-9-]+)\]\(#gap-\1\)\)", text)


def passage(name: str) -> str:
    """The text of the shared passage ``_name.md``."""
    return _join(_text("_" + name).splitlines())


def load_explanations() -> dict[tuple[str, str, str], tuple[str, str]]:
    """``(entry, row slug, quantity) -> (cause, text)`` from this folder's markdown files (see the
    module); the cause is the file's name without ``.md``."""
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
            out[(entry, slug, quantity)] = (f.name.removesuffix(".md"), text)
    return out


EXPLANATIONS: dict[tuple[str, str, str], tuple[str, str]] = load_explanations()
"""``(entry, row slug, quantity) -> (cause, explanation)`` of a marked gap: the cause found, or what was
tried while it stays open. The tables write each cause once under the cells it explains."""

UNEXPLAINED = ("open", "not explained yet")
"""The cause and text of a marked gap without a recorded explanation."""

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


def gap_sd(ours: Sequence[float], paper: tuple[float, float | None], paper_runs: int = RUNS) -> float | None:
    """``|mean(ours) - paper mean|`` over the standard deviation of the difference of the two means,
    ``sqrt(sd_paper**2 / paper_runs + sd_ours**2 / len(ours))`` (see the module); ``None`` when neither
    side has a standard deviation or it is zero, or ``ours`` is empty.

    >>> round(gap_sd([93.63, 93.71], (94.67, 0.11)), 2)  # 1.0 / sqrt(0.11^2 / 5 + 0.0566^2 / 2)
    15.77
    """
    vals = [float(v) for v in ours if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    mean = sum(vals) / len(vals)
    sd_ours = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    sd = math.sqrt((paper[1] or 0.0) ** 2 / paper_runs + sd_ours ** 2 / len(vals))
    if sd == 0.0:
        return None
    return abs(mean - paper[0]) / sd


def explanation(entry: str, slug: str, quantity: str) -> tuple[str, str]:
    """``(cause, text)`` of a marked gap, or :data:`UNEXPLAINED`."""
    return EXPLANATIONS.get((entry, slug, quantity), UNEXPLAINED)
