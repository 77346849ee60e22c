"""``bimu report --check PAGE``: every number of a results page recomputed from the run files.

A results page (``docs/results.md``, :mod:`bimu.reproduce.results_page`) names, for each section, the
``bimu reproduce NAME --scale S --out OUT`` command that made it. :func:`check_page` rebuilds every
section from what lies under ``OUT`` now, training nothing: a run table from its complete runs
(:func:`~bimu.reproduce.runtable.table_from_runs`, every seed found), a computed table (the memory
footprint, the learning-rate map) by computing it again. It renders the page again from those tables
with the page's own command and compares the two, table cell by table cell and line by line (the
``written ... at commit`` line and figure lines excepted: they carry no result). Every difference is
reported: a cell whose number differs, a row with no runs behind it, a row with runs missing from the
page, a note or gap line that differs, a section that cannot be recomputed from run files.

A relative ``--out`` is looked up from the page's folder upwards (the repository root holds
``results/...`` and ``docs/results.md``), so the check runs from any working directory.

The gap notes (:mod:`bimu.reproduce.gaps`) name the run folders of their probes as ``results/...`` paths
(``--out results/probes/NAME``, "its runs committed in results/..."); the check also fails, one line per
note and path, when such a path exists neither from the page's folder upwards nor in the source tree
(:func:`missing_gap_runs`).

>>> split_sections("# T\\n\\nintro\\n## a: x\\nl1\\n## b: y\\nl2")
(['# T', '', 'intro'], [('## a: x', ['l1']), ('## b: y', ['l2'])])
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import tempfile
from pathlib import Path

from bimu.reproduce.entries import ENTRIES
from bimu.reproduce.results_page import render_page
from bimu.reproduce.spec import Options, data_status

_PAGE_COMMAND = re.compile(r"Generated from real run directories by `([^`]+)`")
_SECTION_COMMAND = re.compile(r"^- command: `([^`]+)`")
_RUN_PATH = re.compile(r"(?<![\w./-])results/[\w.+-]+(?:/[\w.+-]+)*")


class PageCheckError(ValueError):
    """A page that cannot be checked at all (not a results page, a bad command line on it)."""


def split_sections(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """``(lines before the first section, [(heading, body lines)])`` of a markdown page."""
    head: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append((line, []))
        elif sections:
            sections[-1][1].append(line)
        else:
            head.append(line)
    return head, sections


def section_options(command: str, page: Path) -> tuple[str, Options, Path]:
    """``(entry name, options with out as written, the out folder found on disk)`` of a section's
    ``bimu reproduce`` command; PageCheckError for a command that is not one."""
    from bimu.reproduce.options import options_parser

    words = shlex.split(command)
    if words[:2] != ["bimu", "reproduce"] or len(words) < 3 or words[2] not in ENTRIES:
        raise PageCheckError(f"not a bimu reproduce command: {command}")
    try:
        ns = options_parser().parse_args(words[3:])
    except SystemExit as e:
        raise PageCheckError(f"cannot read the command {command!r}") from e
    out = ns.out or "reproduce"
    opts = Options(scale=ns.scale or "full", out=out, benchmark=ns.benchmark, from_runs=True,
                   stream_repeats=ns.stream_repeats or 1)
    return words[2], opts, find_out(out, page)


def find_out(out: str, page: Path) -> Path:
    """The folder ``out`` names: itself if absolute, else the first of the page's folder and its
    parents that holds it (the current directory last)."""
    p = Path(out)
    if p.is_absolute():
        return p
    for base in [page.resolve().parent, *page.resolve().parents, Path.cwd()]:
        if (base / p).is_dir():
            return base / p
    return Path.cwd() / p


def recompute(name: str, opts: Options, folder: Path) -> dict:
    """The manifest-like record of one section rebuilt from the files under ``folder`` (``opts.out``
    as written on the page): PageCheckError for an entry that trains its own runs (nothing to read)."""
    from bimu.reproduce.pmnist import memory_footprint_report
    from bimu.reproduce.results_page import reproduce_command
    from bimu.reproduce.runtable import table_from_runs

    entry = ENTRIES[name]
    files: dict[str, str] = {}
    benchmarks: list[str] = []
    seeds: list[int] = [0]
    shown = str(opts.out)
    if entry.build is not None and not (entry.computed or entry.reads_runs):
        raise PageCheckError(f"{name}: its numbers come from runs that 'bimu reproduce {name}' trains and "
                             "reads itself; they cannot be recomputed from run files")
    if entry.build is not None:
        with tempfile.TemporaryDirectory() as tmp:
            if entry.reads_runs and (folder / "runs").is_dir():  # read the runs there, write figures here
                os.symlink((folder / "runs").resolve(), Path(tmp) / "runs")
            rep = entry.build(dataclasses.replace(opts, out=tmp), None)
            table = rep.table
            table.notes = [n.replace(tmp, shown) for n in table.notes]
            files = {Path(f).stem: Path(f).name for f in rep.figures}
            if entry.reads_runs:
                benchmarks, seeds = list(rep.benchmarks), list(rep.seeds or [])
    elif entry.rows is None:
        table = memory_footprint_report(opts, entry.title)
    else:
        table, rows, summaries = table_from_runs(entry, dataclasses.replace(opts, out=str(folder)))
        table.notes = [n.replace(str(folder), shown) for n in table.notes]
        benchmarks = sorted({r.config.benchmark for r in rows if r.config is not None})
        seeds = sorted({int(s["seed"]) for summ in summaries.values() for s in summ})
    return {"name": name, "title": table.title, "scale": opts.scale, "seeds": seeds,
            "command": reproduce_command(name, opts), "files": files,
            "data": [{"benchmark": b, "status": data_status(b)} for b in benchmarks],
            "table": {"header": table.header, "rows": table.rows, "notes": table.notes, "gaps": table.gaps}}


def _ignored(line: str) -> bool:
    return not line.strip() or line.startswith(("- written ", "![")) or line.startswith("|---")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def compare_table(where: str, page: list[str], expected: list[str], n_labels: int) -> list[str]:
    """Differences between two markdown tables (header line first), cell by cell: rows are matched by
    their first ``n_labels`` cells (0: by position)."""
    ph, eh = _cells(page[0]), _cells(expected[0])
    if ph != eh:
        return [f"{where}: table header differs: page {' | '.join(ph)}; recomputed {' | '.join(eh)}"]

    def keyed(rows):
        return {(tuple(_cells(r)[:n_labels]) if n_labels else (f"#{i + 1}",)): _cells(r) for i, r in enumerate(rows)}

    prow, erow = keyed(page[1:]), keyed(expected[1:])
    out = []
    for key, cells in prow.items():
        label = ", ".join(key)
        if key not in erow:
            out.append(f"{where}, row {label}: no complete runs behind it (page: {' | '.join(cells[n_labels:])})")
            continue
        for h, a, b in zip(eh[n_labels:], cells[n_labels:], erow[key][n_labels:]):
            if a != b:
                out.append(f"{where}, row {label}, {h}: page {a}, recomputed {b}")
    for key in erow:
        if key not in prow:
            out.append(f"{where}, row {', '.join(key)}: missing from the page "
                       f"(recomputed: {' | '.join(erow[key][n_labels:])})")
    return out


def compare_lines(where: str, page: list[str], expected: list[str], n_labels: int = 0) -> list[str]:
    """Differences between two sections' lines: their tables cell by cell (:func:`compare_table`),
    other lines as wholes."""
    ptab = [line for line in page if line.startswith("|") and not line.startswith("|---")]
    etab = [line for line in expected if line.startswith("|") and not line.startswith("|---")]
    out = compare_table(where, ptab, etab, n_labels) if ptab and etab else (
        [f"{where}: the table is missing from the page"] if etab else
        [f"{where}: the page has a table that cannot be recomputed"] if ptab else [])
    prest = [line for line in page if not _ignored(line) and not line.startswith("|")]
    erest = [line for line in expected if not _ignored(line) and not line.startswith("|")]
    out += [f"{where}: page line not recomputed: {line}" for line in prest if line not in erest]
    out += [f"{where}: recomputed line missing from the page: {line}" for line in erest if line not in prest]
    return out


def gap_notes_dir() -> Path:
    """The folder of the gap notes (``src/bimu/reproduce/gaps``, package data)."""
    from importlib import resources

    return Path(str(resources.files("bimu.reproduce.gaps")))


def gap_note_paths(notes_dir: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """``(note file, path)`` for each ``results/...`` path that a gap note of ``notes_dir`` (default
    :func:`gap_notes_dir`) names, in order, each once.

    >>> _RUN_PATH.findall("(--out results/probes/ste-one-task, its runs committed in results/a/b.)")
    ['results/probes/ste-one-task', 'results/a/b.']
    """
    folder = Path(notes_dir) if notes_dir is not None else gap_notes_dir()
    out = []
    for f in sorted(folder.glob("*.md")):
        out += [(f.name, m.group(0).rstrip(".")) for m in _RUN_PATH.finditer(f.read_text(encoding="utf-8"))]
    return list(dict.fromkeys(out))


def missing_gap_runs(page: str | os.PathLike, notes_dir: str | os.PathLike | None = None) -> list[str]:
    """One line per ``results/...`` path named by a gap note (:func:`gap_note_paths`) that exists neither
    under the page's folder or one of its parents, the working directory, nor the source tree's root."""
    page = Path(page).resolve()
    bases = [page.parent, *page.parents, Path.cwd(), Path(__file__).resolve().parents[3]]
    return [f"gap note {note} names {path}, a run folder that does not exist"
            for note, path in gap_note_paths(notes_dir) if not any((b / path).exists() for b in bases)]


def check_page(page: str | Path) -> tuple[list[str], list[str]]:
    """``(problems, commands that regenerate the page)``; no problems: every number on the page is what
    its run files give. PageCheckError for a file that is not a results page."""
    page = Path(page)
    if not page.is_file():
        raise PageCheckError(f"no such page: {page}")
    text = page.read_text(encoding="utf-8")
    m = _PAGE_COMMAND.search(text)
    if not m:
        raise PageCheckError(f"{page} is not a results page (no 'Generated from real run directories by `...`')")
    head, sections = split_sections(text)
    problems, found, commands, checked = [], [], [], []
    for heading, body in sections:
        cmd = next((c.group(1) for c in map(_SECTION_COMMAND.match, body) if c), None)
        if cmd is None:
            problems.append(f"{heading[3:]}: no '- command:' line")
            continue
        try:
            name, opts, folder = section_options(cmd, page)
            found.append((folder, recompute(name, opts, folder)))
            commands.append(reproduce_from_runs(name, opts))
            checked.append((heading, body, len(ENTRIES[name].label_headers)))
        except PageCheckError as e:
            problems.append(f"{heading[3:]}: {e}")
    problems += missing_gap_runs(page)
    if not found:
        return problems or [f"{page}: no section to check"], [m.group(1)]
    expected = render_page(found, page.parent, m.group(1))
    ehead, esections = split_sections(expected)
    problems += compare_lines("page header", head, ehead, 0)
    for (heading, body, n_labels), (eheading, ebody) in zip(checked, esections):
        if heading != eheading:
            problems.append(f"{heading[3:]}: heading differs from the recomputed {eheading[3:]!r}")
        problems += compare_lines(heading[3:], body, ebody, n_labels)
    return problems, commands + [m.group(1)]


def reproduce_from_runs(name: str, opts: Options) -> str:
    """The command that rewrites a section's table and manifest from its run files."""
    from bimu.reproduce.results_page import reproduce_command

    return reproduce_command(name, dataclasses.replace(opts, from_runs=True))
