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


@dataclasses.dataclass
class Table:
    """A report table: a title, a header and rows of cells (strings), plus notes under it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = dataclasses.field(default_factory=list)

    def markdown(self) -> str:
        """The table as markdown (title, table, notes)."""
        lines = [f"## {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "|".join("---" for _ in self.header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
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
        lines += [f"% {latex_escape(n)}" for n in self.notes]
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
