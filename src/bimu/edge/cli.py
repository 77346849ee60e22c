"""The ``export`` and ``compute-cost`` subcommands (registered by :func:`add_parser`).

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="bimu")
>>> add_parser(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["export", "runs/x/seed-0", "--format", "c-header", "--out", "edge"])
>>> args.format, args.out, args.func is run_export
('c-header', 'edge', True)
"""

from __future__ import annotations

import argparse
import json
import sys

from bimu.edge.formats import FORMAT_FILES, FORMATS


def add_parser(subparsers) -> None:
    """Register ``export`` and ``compute-cost`` on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "export", help="export a trained binary network (thresholds + reference C) for a device",
        description="Write the packed uint32 thresholds of a run's network as .npz, or as a C header "
                    "with a reference C inference file (same votes as Python for the same seed).")
    p.add_argument("run_dir", help="run directory holding checkpoint.pt (or the checkpoint file)")
    p.add_argument("--format", choices=FORMATS, default="npz", help="output format (default: npz)")
    p.add_argument("--out", default=None, help="output directory (default: RUN_DIR/edge-FORMAT)")
    p.add_argument("--force", action="store_true", help="overwrite files an earlier export wrote there")
    p.add_argument("--input-bits", type=int, default=8, help="bits of the quantised input (default 8)")
    p.add_argument("--input-max", type=float, default=None,
                   help="largest |input| to represent without clipping (default 4.0); sets the "
                        "power-of-two input scale")
    p.set_defaults(func=run_export)

    c = subparsers.add_parser(
        "compute-cost", help="measure inference vs training cost and the expected cost of active learning",
        description="The paper's compute-cost appendix measured on this CPU: one MC forward pass "
                    "(bit-packed and float), one training step, C_AL = K (C_inf + B_rate C_train) and "
                    "C_full = K (C_inf + C_train), beside the paper's STM32 numbers.")
    c.add_argument("--sizes", type=int, nargs="+", default=[8192, 19], help="network widths (default 8192 19)")
    c.add_argument("--preset", default="openloris-8192", help="BiMU preset (default openloris-8192; 'none')")
    c.add_argument("--k", type=int, default=2, help="MC predictors K (default: the paper's 2)")
    c.add_argument("--query-rate", type=float, default=None, help="B_rate (default: the paper's 0.033)")
    c.add_argument("--run", default=None, help="take B_rate as updates/examples seen of this run's checkpoint")
    c.add_argument("--examples", type=int, default=32, help="examples per timing (default 32)")
    c.add_argument("--repeats", type=int, default=5, help="interleaved repeats, median kept (default 5)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random network and sampler (default 0)")
    c.add_argument("--json", default=None, help="also write the table as JSON to this file")
    c.set_defaults(func=run_compute_cost)


def run_export(args) -> int:
    """``bimu export``: returns 0 on success, 2 with a message on bad input."""
    from bimu.atomic import check_new_file
    from bimu.edge.export import export_run

    out = args.out or f"{args.run_dir.rstrip('/')}/edge-{args.format}"
    try:
        for name in FORMAT_FILES[args.format]:
            check_new_file(f"{out}/{name}", overwrite=args.force)
        paths = export_run(args.run_dir, out, args.format, input_bits=args.input_bits, input_max=args.input_max)
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"bimu export: error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


def run_compute_cost(args) -> int:
    """``bimu compute-cost``: prints the table (markdown); returns 0, or 2 on bad input."""
    from bimu.edge.cost import compute_cost_table

    preset = None if str(args.preset).lower() == "none" else args.preset
    try:
        table = compute_cost_table(sizes=args.sizes, preset=preset, k=args.k, query_rate=args.query_rate,
                                   run_dir=args.run, n_examples=args.examples, repeats=args.repeats,
                                   seed=args.seed)
    except (FileNotFoundError, ValueError) as exc:
        print(f"bimu compute-cost: error: {exc}", file=sys.stderr)
        return 2
    print(table.format())
    if args.json:
        from bimu.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps(table.as_dict(), indent=2))
    return 0


def main(argv=None) -> int:
    """Stand-alone entry (``python -m bimu.edge.cli ...``) until ``bimu.cli`` lists this module."""
    parser = argparse.ArgumentParser(prog="bimu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
