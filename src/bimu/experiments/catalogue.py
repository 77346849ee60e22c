"""``bimu list``: what there is to run, one section each: methods (with the paper's names), their
hyperparameter presets, benchmarks and reproductions (``bimu reproduce NAME``).

>>> text = catalogue({"pmnist-1000": "Table 1"})
>>> [line for line in text.splitlines() if not line.startswith(" ")]
['methods (bimu run --method NAME; any letter case, or the paper name):', '', 'presets (--preset KEY):', '', 'benchmarks (bimu run NAME):', '', 'reproductions (bimu reproduce NAME):']
>>> "  pmnist-1000  Table 1" in text.splitlines()
True
"""

from __future__ import annotations

from collections.abc import Mapping


def _section(title: str, rows: list[tuple[str, str]]) -> list[str]:
    width = max((len(name) for name, _ in rows), default=0)
    return [title, *(f"  {name.ljust(width)}  {text}".rstrip() for name, text in rows)]


def catalogue(reproductions: Mapping[str, str] | None = None) -> str:
    """The text of ``bimu list``: registered methods (name and paper name), each method's presets,
    registered benchmarks (name and description) and ``reproductions`` (name -> title), a section each."""
    from bimu.data.benchmarks import available_benchmarks, benchmark_entry
    from bimu.methods import available_methods, get_method

    methods = [(m, get_method(m).info.paper_name or "") for m in available_methods()]
    presets = [(m, ", ".join(sorted(get_method(m).presets)) or "-") for m in available_methods()]
    benchmarks = [(b, benchmark_entry(b).description) for b in available_benchmarks()]
    lines = _section("methods (bimu run --method NAME; any letter case, or the paper name):", methods)
    lines += ["", *_section("presets (--preset KEY):", presets)]
    lines += ["", *_section("benchmarks (bimu run NAME):", benchmarks)]
    lines += ["", *_section("reproductions (bimu reproduce NAME):", sorted((reproductions or {}).items()))]
    return "\n".join(lines)
