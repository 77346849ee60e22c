"""A report table of ``bimu reproduce``, written as markdown, CSV and LaTeX.

>>> latex_escape("acc (%) ± 1")
'acc (\\\\%) $\\\\pm$ 1'
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from bimu.atomic import atomic_write_text


def latex_escape(text: str) -> str:
    """Escape a table cell for LaTeX (``%``, ``&``, ``_``, ``#``; ``±`` as ``$\\pm$``)."""
    out = str(text)
    for a, b in (("\\", "\\textbackslash{}"), ("%", "\\%"), ("&", "\\&"), ("_", "\\_"), ("#", "\\#")):
        out = out.replace(a, b)
    return out.replace("±", "$\\pm$")


def gap_lines(gaps: list[dict], written: dict[str, str] | None = None, where: str = "") -> list[str]:
    """The note lines of a table's marked gaps (:attr:`Table.gaps`), each cause's text written once.

    ``written`` (cause -> where its text was written) is shared by the tables of one page: a cause
    already written is referred to by its anchor ``#gap-CAUSE`` instead of repeated; ``where`` names
    this table for the causes it writes. A gap without cells is a passage shared by several causes.

    >>> g = [{"mark": "†1", "cause": "c", "cells": ["A, acc: 1 against 2 (3.0 sd)"], "text": "why"}]
    >>> seen = {}
    >>> gap_lines(g, seen, "t1")
    ['†1 A, acc: 1 against 2 (3.0 sd): <a id="gap-c"></a>c: why']
    >>> gap_lines(g, seen, "t2")
    ['†1 A, acc: 1 against 2 (3.0 sd): c, written under t1: see [c](#gap-c)']
    """
    written = {} if written is None else written
    out = []
    for g in gaps:
        cause, head = g["cause"], "; ".join(g["cells"])
        if not g["cells"]:
            if cause not in written:
                out.append(f'<a id="gap-{cause}"></a>shared cause {cause}: {g["text"]}')
                written[cause] = where
            continue
        if cause in written and g["text"] != "not explained yet":
            out.append(f"{g['mark']} {head}: {cause}, written under {written[cause]}: see [{cause}](#gap-{cause})")
        elif g["text"] == "not explained yet":
            out.append(f"{g['mark']} {head}: {g['text']}")
        else:
            out.append(f'{g["mark"]} {head}: <a id="gap-{cause}"></a>{cause}: {g["text"]}')
            written[cause] = where
    return out


@dataclasses.dataclass
class Table:
    """A report table: a title, a header and rows of cells (strings), notes under it and its marked
    gaps (``{"mark", "cause", "cells", "text"}`` dicts, :func:`gap_lines`)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = dataclasses.field(default_factory=list)
    gaps: list[dict] = dataclasses.field(default_factory=list)

    def note_lines(self) -> list[str]:
        """The notes, then the gap lines (each cause written once)."""
        return list(self.notes) + gap_lines(self.gaps)

    def markdown(self) -> str:
        """The table as markdown (title, table, notes)."""
        lines = [f"## {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "|".join("---" for _ in self.header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        notes = self.note_lines()
        if notes:
            lines += [""] + [f"- {n}" for n in notes]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        """The same table as CSV (header row first)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.header)
        w.writerows(self.rows)
        return buf.getvalue()

    def latex(self) -> str:
        """The same table as a LaTeX ``tabular`` (booktabs rules) with the title as a comment."""
        cols = "l" + "c" * (len(self.header) - 1)
        lines = [f"% {self.title}", f"\\begin{{tabular}}{{{cols}}}", "\\toprule",
                 " & ".join(latex_escape(h) for h in self.header) + " \\\\", "\\midrule"]
        lines += [" & ".join(latex_escape(c) for c in r) + " \\\\" for r in self.rows]
        lines += ["\\bottomrule", "\\end{tabular}"]
        lines += [f"% {latex_escape(n)}" for n in self.note_lines()]
        return "\n".join(lines) + "\n"

    def write(self, out: str | Path, name: str) -> dict[str, Path]:
        """Write ``OUT/NAME.md``, ``.csv`` and ``.tex``; returns the paths by format."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        for ext, text in (("md", self.markdown()), ("csv", self.csv()), ("tex", self.latex())):
            paths[ext] = out / f"{name}.{ext}"
            atomic_write_text(paths[ext], text)
        return paths
