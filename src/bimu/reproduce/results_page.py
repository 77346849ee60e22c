"""The results page (``docs/results.md``) built from real ``bimu reproduce`` output folders.

Every ``bimu reproduce NAME`` writes a manifest ``OUT/NAME.json`` beside its tables
(:func:`write_manifest`): the command that regenerates it, the seeds, the scale, each data set and
whether it is real or a stand-in, the table itself, the figure files, the exit code, the time and the
git commit. ``bimu report --results-page docs/results.md OUT...`` (:func:`write_results_page`) turns
every manifest found under the given folders (their ``runs/`` trees excepted) into one markdown page,
stating for each table the command, seeds, scale and data status, so that no number on the page comes
without its provenance. Nothing on the page is typed by hand.

>>> render_page([])
Traceback (most recent call last):
...
FileNotFoundError: no reproduction manifests (OUT/NAME.json written by bimu reproduce) to build a results page from
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bimu.untrusted import read_json

MANIFEST_FORMAT = 1
"""Version of the manifest layout."""

STUDIES = (
    "`docs/active-learning.md` (active learning on the stand-ins: objects-ti updates saved at matched accuracy, "
    "animals-ti over 5 seeds, and animals-ti at the paper's stream length)",
    "`docs/performance.md` (engine speed)",
)
"""Pointers the results page gives to studies that are not ``bimu reproduce`` tables."""


def reproduce_command(name: str, opts) -> str:
    """The ``bimu reproduce`` command line that regenerates (or reuses) this report."""
    if getattr(opts, "from_runs", False):  # the data and stream select which runs are read
        parts = ["bimu", "reproduce", name, "--scale", opts.scale, "--out", str(opts.out)]
        if getattr(opts, "benchmark", None):
            parts += ["--benchmark", opts.benchmark]
        if getattr(opts, "stream_repeats", 1) != 1:
            parts += ["--stream-repeats", str(opts.stream_repeats)]
        return " ".join(parts + ["--from-runs"])
    parts = ["bimu", "reproduce", name, "--scale", opts.scale, "--seeds", str(len(opts.seeds)), "--out",
             str(opts.out)]
    if opts.seeds and opts.seeds[0] != 0:
        parts += ["--first-seed", str(opts.seeds[0])]
    if getattr(opts, "benchmark", None):
        parts += ["--benchmark", opts.benchmark]
    if getattr(opts, "rows", None):
        parts += ["--rows", *opts.rows]
    if getattr(opts, "stream_repeats", 1) != 1:
        parts += ["--stream-repeats", str(opts.stream_repeats)]
    if getattr(opts, "engine", "auto") != "auto":
        parts += ["--engine", opts.engine]
    return " ".join(parts)


def write_manifest(opts, entry, table, paths: dict, benchmarks: Sequence[str], code: int,
                   seeds: Sequence[int] | None = None) -> Path:
    """Write ``OUT/NAME.json`` (atomically) describing one reproduction (``seeds``: the seeds its
    table shows, default ``opts.seeds``); returns its path."""
    from bimu.atomic import atomic_write_text
    from bimu.reproduce.spec import data_status
    from bimu.rundir import dumps, git_commit

    out = Path(opts.out)
    manifest = {
        "format": MANIFEST_FORMAT, "name": entry.name, "title": table.title, "scale": opts.scale,
        "seeds": list(opts.seeds if seeds is None else seeds), "command": reproduce_command(entry.name, opts),
        "data": [{"benchmark": b, "status": data_status(b)} for b in benchmarks],
        "files": {k: os.path.relpath(p, out) for k, p in paths.items()},
        "exit_code": int(code), "written": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(Path(__file__).parent),
        "table": {"header": table.header, "rows": table.rows, "notes": table.notes, "gaps": table.gaps},
    }
    path = out / f"{entry.name}.json"
    atomic_write_text(path, dumps(manifest))
    return path


def find_manifests(dirs: Iterable[str | os.PathLike]) -> list[tuple[Path, dict[str, Any]]]:
    """``(folder, manifest)`` for every reproduction manifest under ``dirs`` (``runs/`` trees skipped);
    FileNotFoundError naming a folder that does not exist."""
    found = []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise FileNotFoundError(f"no such folder: {d}")
        for p in sorted(d.rglob("*.json")):
            if "runs" in p.relative_to(d).parts[:-1]:
                continue
            try:
                m = read_json(p)
            except (OSError, ValueError):
                continue
            if isinstance(m, dict) and m.get("format") == MANIFEST_FORMAT and "table" in m and "command" in m:
                check_manifest(m, p)
                found.append((p.parent, m))
    return found


MANIFEST_FIELDS = {"name": str, "title": str, "scale": str, "command": str, "table": dict, "seeds": list,
                   "data": list, "exit_code": int, "written": str, "git_commit": (str, type(None))}
"""The types of a manifest's fields; the first five are needed."""


def check_manifest(m: dict[str, Any], path: str | os.PathLike) -> None:
    """ValueError naming ``path`` and the field unless the manifest ``m`` holds what a results page
    section is written from: ``name``, ``title``, ``scale``, ``command`` and a ``table`` with a ``header``
    and ``rows`` (lists), each field of its type, and ``data`` a list of objects."""
    from bimu.untrusted import check_fields

    missing = [k for k in ("name", "title", "scale", "command", "table") if k not in m]
    if missing:
        raise ValueError(f"{path}: a reproduction manifest without {', '.join(missing)}; rerun its bimu reproduce "
                         "command to rewrite it")
    check_fields(m, MANIFEST_FIELDS, str(path))
    check_fields(m["table"], {"header": list, "rows": list, "notes": list, "gaps": list}, f"{path}: table")
    if "header" not in m["table"] or "rows" not in m["table"] or not all(isinstance(r, list) for r in m["table"]["rows"]):
        raise ValueError(f"{path}: its table needs a header and rows (lists)")
    if not all(isinstance(d, dict) and isinstance(d.get("benchmark"), str) and isinstance(d.get("status"), str)
               for d in m.get("data", [])):
        raise ValueError(f"{path}: its data must be a list of objects with a benchmark and a status")


def _md_table(header, rows) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def row_seed_counts(table: dict) -> list[int]:
    """The seeds behind each row of a manifest's ``table``, read from its ``Seeds`` column (a seed marked
    diverged not counted; rows without runs, ``-`` or ``n/a``, left out); ``[]`` without that column.

    >>> table = {"header": ["Method", "Seeds"], "rows": [["a", "0,1,2"], ["b", "0 (diverged),1"], ["c", "-"]]}
    >>> row_seed_counts(table)
    [3, 1]
    """
    header = table.get("header", [])
    if "Seeds" not in header:
        return []
    i = header.index("Seeds")
    cells = [str(r[i]) for r in table.get("rows", []) if len(r) > i]
    return [sum(s.strip().isdigit() for s in c.split(",")) for c in cells if any(ch.isdigit() for ch in c)]


def seeds_text(seeds: Sequence[int], counts: Sequence[int], diverged: bool = False) -> str:
    """How many seeds a section shows, and, when its rows differ (or differ from the section's), how many
    each row has (:func:`row_seed_counts`; ``diverged``: some seeds diverged and are not counted).

    >>> seeds_text([0, 1, 2], [3, 3]), seeds_text([0, 1, 2], [2, 3, 2, 1])
    ('3 seeds', '3 seeds; per row: 3 seeds in 1 row, 2 seeds in 2 rows, 1 seed in 1 row (its Seeds column)')
    """
    text = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
    if counts and set(counts) != {len(seeds)}:
        by = {k: counts.count(k) for k in sorted(set(counts), reverse=True)}
        text += "; per row: " + ", ".join(f"{k} seed{'s' * (k != 1)} in {v} row{'s' * (v != 1)}"
                                          for k, v in by.items())
        text += " (its Seeds column" + ("; diverged seeds not counted)" if diverged else ")")
    return text


def render_section(folder: Path, m: dict, page_dir: Path, written: dict[str, str] | None = None) -> list[str]:
    """The markdown of one reproduction: provenance lines, the table, its notes, its marked gaps and
    figures. ``written`` (cause -> section) is shared by a page's sections so that each gap's cause is
    written once on the page and referred to elsewhere (:func:`~bimu.reproduce.table.gap_lines`)."""
    from bimu.reproduce.table import gap_lines

    scale = m["scale"] + (" (smoke test: not comparable with the paper)" if m["scale"] == "quick" else
                          " (the paper's protocol)")
    data = "; ".join(f"{d['benchmark']} ({d['status']})" for d in m.get("data", [])) or "none (computed)"
    seeds = m.get("seeds", [])
    fewer = "; the paper averages 5 runs" if m.get("data") and len(seeds) < 5 else ""
    diverged = any("(diverged)" in str(c) for r in m["table"].get("rows", []) for c in r)
    lines = [f"## {m['name']}: {m['title']}", "",
             f"- command: `{m['command']}`",
             f"- seeds: {', '.join(map(str, seeds))} ({seeds_text(seeds, row_seed_counts(m['table']), diverged)}{fewer})",
             f"- scale: {scale}",
             f"- data: {data}",
             f"- written {m.get('written', '?')} at commit {str(m.get('git_commit') or '?')[:10]}"
             + ("" if m.get("exit_code", 0) == 0 else f"; EXIT CODE {m['exit_code']} (some runs failed)"),
             ""]
    lines += _md_table(m["table"]["header"], m["table"]["rows"])
    notes = list(m["table"].get("notes", [])) + gap_lines(m["table"].get("gaps", []), written, m["name"])
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    figs = [f for k, f in m.get("files", {}).items() if str(f).endswith(".png")]
    for f in figs:
        rel = os.path.relpath(folder / f, page_dir)
        lines += ["", f"![{Path(f).stem}]({rel})"]
    return lines + [""]


def render_page(found: Sequence[tuple[Path, dict]], page_dir: str | os.PathLike = ".",
                command: str = "") -> str:
    """The whole page from :func:`find_manifests` output."""
    if not found:
        raise FileNotFoundError("no reproduction manifests (OUT/NAME.json written by bimu reproduce) to build "
                                "a results page from")
    page_dir = Path(page_dir)
    quick = sorted({m["name"] for _, m in found if m["scale"] == "quick"})
    standin = sorted({m["name"] for _, m in found if any(d["status"] != "real" for d in m.get("data", []))})
    lines = ["# Results", "",
             "Generated from real run directories" + (f" by `{command}`" if command else "")
             + "; do not edit by hand. Each section gives the command that regenerates it, its seeds, its "
             "scale and whether its data set is real or an offline stand-in. The paper's numbers are in the "
             "column next to each of ours.", ""]
    lines += [f"Studies kept outside these tables: {', '.join(STUDIES)}.", ""]
    if quick:
        lines += [f"**Quick scale (smoke tests, not comparable with the paper):** {', '.join(quick)}.", ""]
    if standin:
        lines += [f"**Stand-in data (not the paper's data sets):** {', '.join(standin)}.", ""]
    lines += ["| reproduction | scale | seeds | data |", "|---|---|---|---|"]
    seen: dict[str, int] = {}
    for _, m in found:
        data = ", ".join(f"{d['benchmark']} ({d['status']})" for d in m.get("data", [])) or "-"
        anchor = _anchor(m)
        n = seen.get(anchor, 0)
        seen[anchor] = n + 1
        anchor += f"-{n}" if n else ""  # GitHub numbers repeated headings
        counts = row_seed_counts(m["table"])
        n = len(m.get("seeds", []))
        span = "-".join(dict.fromkeys(str(k) for k in (min(counts), max(counts)))) if counts else ""
        shown = str(n) if not counts or set(counts) == {n} else f"{span} a row"
        lines.append(f"| [{m['name']}](#{anchor}) | {m['scale']} | {shown} | {data} |")
    lines.append("")
    written: dict[str, str] = {}
    for folder, m in found:
        lines += render_section(folder, m, page_dir, written)
    return "\n".join(lines)


def _anchor(m: dict) -> str:
    text = f"{m['name']}: {m['title']}".lower()
    keep = "".join(c for c in text if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def write_results_page(page: str | os.PathLike, dirs: Sequence[str | os.PathLike], command: str = "") -> Path:
    """Build the page from the manifests under ``dirs`` and write it atomically to ``page``."""
    from bimu.atomic import atomic_write_text

    page = Path(page)
    text = render_page(find_manifests(dirs), page.parent, command)
    atomic_write_text(page, text)
    return page
