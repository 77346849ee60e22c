"""The ``export``, ``import-device`` and ``compute-cost`` subcommands (registered by :func:`add_parser`).

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
    """Register ``export``, ``import-device`` and ``compute-cost`` on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "export", help="export a trained binary network for a device (inference, or a learner that keeps learning)",
        description="Write the packed uint32 thresholds of a run's network as .npz, or as a C header "
                    "with a reference C inference file (same votes as Python for the same seed), or "
                    "(c-learner) the state of the C learner with its sources, for a device that keeps learning.")
    p.add_argument("run_dir", help="run directory holding checkpoint.pt (or the checkpoint file)")
    p.add_argument("--format", choices=FORMATS, default="npz", help="output format (default: npz)")
    p.add_argument("--out", default=None, help="output directory (default: RUN_DIR/edge-FORMAT)")
    p.add_argument("--force", action="store_true", help="overwrite files an earlier export wrote there")
    p.add_argument("--input-bits", type=int, default=8, help="bits of the quantised input (default 8)")
    p.add_argument("--input-max", type=float, default=None,
                   help="largest |input| to represent without clipping (default 4.0); sets the "
                        "power-of-two input scale")
    q = p.add_argument_group("c-learner (a device that keeps learning; docs/on-device.md)")
    q.add_argument("--query-samples", type=int, default=2,
                   help="hard samples K of the device's query decisions (default 2)")
    q.add_argument("--query-threshold", type=float, default=0.5,
                   help="variation ratio at or above which the device asks for a label (default 0.5: with K = 2, "
                        "when the two samples disagree)")
    p.set_defaults(func=run_export)

    i = subparsers.add_parser(
        "import-device", help="read a device's learner state back into a run directory (then bimu evaluate it)",
        description="Check a state file written by the C learner (bimu_state_write) against the run it was "
                    "exported from and write a seed directory holding the run's configuration and the device's "
                    "lambda and counters: `bimu evaluate OUT` scores what the device learned.")
    i.add_argument("run_dir", help="the run directory the device was exported from (bimu export --format c-learner)")
    i.add_argument("state", help="the state file the device wrote")
    i.add_argument("--out", required=True, help="new seed directory for the device's state")
    i.add_argument("--force", action="store_true", help="write into a folder that is not empty")
    i.set_defaults(func=run_import_device)

    c = subparsers.add_parser(
        "compute-cost", help="measure inference vs training cost and the expected cost of active learning",
        description="The paper's compute-cost appendix measured on this CPU: one MC forward pass "
                    "(bit-packed and float), one training step, C_AL = K (C_inf + B_rate C_train) and "
                    "C_full = K (C_inf + C_train), beside the paper's STM32 numbers; then the C learners "
                    "cross-built for Cortex-M4 / Cortex-M7 and run under QEMU: instructions (not cycles) per "
                    "inference (one MC sample) and per training step for BiMU, BayesBiNN, STE and Syn. Meta. "
                    "beside the paper's cycle table (needs arm-none-eabi-gcc and qemu-system-arm: "
                    "scripts/ci_arm.sh installs them; without them one line says so).")
    c.add_argument("--sizes", type=int, nargs="+", default=[8192, 19], help="network widths (default 8192 19)")
    c.add_argument("--preset", default="openloris-8192", help="BiMU preset (default openloris-8192; 'none')")
    c.add_argument("--k", type=int, default=2, help="MC predictors K (default: the paper's 2)")
    c.add_argument("--query-rate", type=float, default=None, help="B_rate (default: the paper's 0.033)")
    c.add_argument("--run", default=None, help="take B_rate as updates/examples seen of this run's checkpoint")
    c.add_argument("--examples", type=int, default=32, help="examples per timing (default 32)")
    c.add_argument("--repeats", type=int, default=5, help="interleaved repeats, median kept (default 5)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random network and sampler (default 0)")
    c.add_argument("--json", default=None, help="also write the table as JSON to this file")
    c.add_argument("--emulated", choices=("auto", "yes", "no", "only"), default="auto",
                   help="the emulated Cortex-M instruction table: auto (when the toolchain is installed, "
                        "default), yes (an error without it), no, only (skip this CPU's timings)")
    c.add_argument("--scale", choices=("quick", "full"), default="full",
                   help="emulated networks: quick 512->16, full also the 8192->19 head (default full)")
    c.add_argument("--cores", nargs="+", choices=("m4", "m7", "m7sp"), default=["m4", "m7"],
                   help="emulated cores: m4, m7 (double-precision FPU), m7sp (single-precision FPv5-SP, as on "
                        "an STM32F72x/F74x) (default m4 m7)")
    c.set_defaults(func=run_compute_cost)


def run_export(args) -> int:
    """``bimu export``: returns 0 on success, 2 with a message on bad input."""
    from bimu.atomic import check_new_file
    from bimu.edge.export import export_run

    out = args.out or f"{args.run_dir.rstrip('/')}/edge-{args.format}"
    try:
        for name in FORMAT_FILES[args.format]:
            check_new_file(f"{out}/{name}", overwrite=args.force)
        if args.format == "c-learner":
            paths = export_run(args.run_dir, out, args.format, query_samples=args.query_samples,
                               query_threshold=args.query_threshold)
        else:
            paths = export_run(args.run_dir, out, args.format, input_bits=args.input_bits, input_max=args.input_max)
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"bimu export: error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


def run_import_device(args) -> int:
    """``bimu import-device``: returns 0 on success (prints the new seed directory and the state's
    counters), 2 with one line on a refused state or bad input."""
    from bimu.edge.device_state import import_device

    try:
        out = import_device(args.run_dir, args.state, args.out, force=args.force)
    except (FileNotFoundError, ValueError) as exc:
        print(f"bimu import-device: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    info = json.loads((out / "device.json").read_text())
    c = info["counters"]
    print(f"{out}: {info['precision']} state, {c['examples_seen']} examples seen, {c['labels_queried']} labels "
          f"queried, {c['updates_applied']} updates; lambda hash {info['lambda_hash']}")
    print(f"evaluate it with: bimu evaluate {out}")
    return 0


def run_compute_cost(args) -> int:
    """``bimu compute-cost``: prints the table (markdown); returns 0, or 2 on bad input."""
    from bimu.edge.cost import PAPER_QUERY_RATE, compute_cost_table, emulated_cost_section, query_rate_from_run

    preset = None if str(args.preset).lower() == "none" else args.preset
    content = {}
    try:
        if args.emulated != "only":
            table = compute_cost_table(sizes=args.sizes, preset=preset, k=args.k, query_rate=args.query_rate,
                                       run_dir=args.run, n_examples=args.examples, repeats=args.repeats,
                                       seed=args.seed)
            print(table.format())
            content = table.as_dict()
        if args.emulated != "no":
            rate = content.get("query_rate", args.query_rate)
            if rate is None:
                rate = query_rate_from_run(args.run) if args.run else PAPER_QUERY_RATE
            text, emulated = emulated_cost_section(args.scale, k=args.k, query_rate=rate, cores=args.cores,
                                                   seed=args.seed, required=args.emulated in ("yes", "only"))
            print(text)
            content["emulated"] = emulated.as_dict() if emulated is not None else None
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"bimu compute-cost: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        from bimu.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps(content, indent=2))
    return 0


def main(argv=None) -> int:
    """Stand-alone entry (``python -m bimu.edge.cli ...``) until ``bimu.cli`` lists this module."""
    parser = argparse.ArgumentParser(prog="bimu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
