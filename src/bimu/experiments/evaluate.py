"""``bimu evaluate``: score a run's checkpointed model again under other evaluation settings (nothing
is trained).

A seed directory's ``checkpoint.pt`` holds the model after its last completed task. This rebuilds the
run's benchmark and method from its ``config.json``, loads that state and, for each chosen task ``j``,
measures the accuracy on ``j``'s test set and, unless ``ood=False``, the OOD ROC-AUC of each
uncertainty score with ``j``'s test set as the in-distribution side. It draws the runner's own
evaluation generators, so with nothing changed it gives the run's own numbers to the bit. What can be
changed is what is evaluated:

- benchmark options (``options``), e.g. ``ood_unstandardised=True``, the OOD preprocessing of the
  paper's runs, or ``test_own_statistics=True``;
- the tasks (``tasks``: 0-based indices), e.g. the last five instead of the current one;
- the number of Monte Carlo samples (``eval_samples``) and the scores;
- how the fused BiMU and BayesBiNN sum a hard-sample evaluation (``eval_sum="grouped"``, faster, rounded
  differently: docs/performance.md), e.g. to score all 1000 tasks of a Permuted-MNIST run.

Training options have no effect, because nothing is trained. Neither has the order of the stream:
test sets and the OOD set do not depend on it.

>>> parse_tasks(["current"], current=99, n_tasks=100), parse_tasks(["last-3", "1"], current=99, n_tasks=100)
([99], [97, 98, 99, 0])
>>> parse_tasks(["3-5", "4"], current=99, n_tasks=100)
[2, 3, 4]
>>> parse_tasks(["101"], current=99, n_tasks=100)
Traceback (most recent call last):
ValueError: --tasks: task 101 is outside the stream's 1..100
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu.experiments.config import OOD_SCORES, RunConfig, parse_benchmark_option
from bimu.rundir import CHECKPOINT, CONFIG, CheckpointError, RunDir, check_checkpoint_state

_NO_CHECKPOINT = ("{path} holds no {name}: only a run's checkpoint holds its model (a run directory copied "
                  "into a repository by scripts/keep_runs.py keeps a finished run's results without it); "
                  "run the stream again with bimu run to score it")


def parse_tasks(spec: Sequence[str], *, current: int, n_tasks: int) -> list[int]:
    """0-based task indices from ``--tasks`` words: ``current`` (the task the checkpoint is after),
    ``all`` (tasks 1 .. current + 1), ``last-N`` (the N tasks up to the current one), 1-based numbers or
    ranges ``A-B`` (tasks A to B, both included); in the order given, each once."""
    out: list[int] = []
    for word in spec:
        w = str(word).strip().lower()
        if w == "current":
            new = [current]
        elif w == "all":
            new = list(range(current + 1))
        elif w.startswith("last-") and w[5:].isdigit() and int(w[5:]) >= 1:
            new = list(range(max(0, current + 1 - int(w[5:])), current + 1))
        elif w.isdigit():
            if not 1 <= int(w) <= n_tasks:
                raise ValueError(f"--tasks: task {w} is outside the stream's 1..{n_tasks}")
            new = [int(w) - 1]
        elif w.count("-") == 1 and all(part.isdigit() for part in w.split("-")):
            a, b = (int(part) for part in w.split("-"))
            if not 1 <= a <= b <= n_tasks:
                raise ValueError(f"--tasks: range {w} is not within the stream's 1..{n_tasks}, first to last")
            new = list(range(a - 1, b))
        else:
            raise ValueError(f"--tasks: {word!r} is not current, all, last-N, a task number or a range A-B")
        out += [t for t in new if t not in out]
    return out


def evaluate_run(path: str | Path, *, tasks: Sequence[str] = ("current",), options: Mapping[str, Any] | None = None,
                 scores: Sequence[str] | None = None, eval_samples: int | None = None, ood: bool = True,
                 data_dir: str | None = None, chance: bool = False, eval_sum: str | None = None) -> dict[str, Any]:
    """Evaluate the model in seed directory ``path``'s checkpoint (see the module docstring).

    Returns ``{"run_dir", "after_task", "after_task_number", "options", "scores", "tasks": [{"task",
    "task_number", "acc", "ood_auc"}], "mean": {...}}``: ``task`` and ``after_task`` are 0-based indices (as
    in ``metrics.jsonl``), ``task_number`` and ``after_task_number`` the same tasks from 1 (as printed, and
    as ``--tasks`` takes them); ``mean`` (with ``sd`` over tasks when there are two
    or more) of the accuracy and of each score's AUC. Every input is checked before the model is loaded.

    With ``chance``, each task also gets ``chance``: the accuracy its predictions would have if they were
    independent of the labels (``sum_c`` share of predictions in class ``c`` times share of labels in
    ``c``: the level a forgotten task falls to, set by the classes the network still prefers), and
    ``top_class`` / ``top_share``, its most predicted class and the share of predictions in it.
    """
    from bimu import metrics
    from bimu.experiments.runner import make_benchmark, make_method
    from bimu.experiments.stream import CHECKPOINT_FORMAT, evaluate_ood, evaluate_test_task

    if eval_samples is not None and int(eval_samples) < 1:
        raise ValueError(f"--eval-samples must be >= 1, got {eval_samples}")
    rd = RunDir(path)
    if not rd.exists(CONFIG):
        raise ValueError(f"{rd.path} is not a seed directory (no {CONFIG}); pass e.g. runs/pmnist-bimu/seed-0")
    if not rd.exists(CHECKPOINT):
        raise ValueError(_NO_CHECKPOINT.format(path=rd.path, name=CHECKPOINT))
    stored = rd.read_json(CONFIG)
    resolved = stored.get("resolved") or {}
    cfg = RunConfig.from_dict({k: v for k, v in stored.items() if k != "resolved"})
    bench_options = dict(cfg.benchmark_options)
    bench_options.update(options or {})
    cfg = cfg.replace(benchmark_options=bench_options, engine=resolved.get("engine", cfg.engine),
                      **({"data_dir": data_dir} if data_dir is not None else {}))
    seed = int(cfg.seeds[0])
    preset, hparams, _ = cfg.resolve_hparams()
    if eval_sum is not None:
        if "eval_sum" not in hparams:
            raise ValueError(f"--eval-sum: {cfg.method} has no eval_sum (the fused BiMU and BayesBiNN have it)")
        hparams = {**hparams, "eval_sum": eval_sum}
    bench = make_benchmark(cfg, seed)  # refuses an option the benchmark does not take, by name
    sizes = [bench.n_features, *cfg.hidden_widths(), bench.n_classes]
    if resolved.get("sizes") not in (None, sizes):
        raise ValueError(f"{rd.path}: these options give a network of sizes {sizes}, the run's is "
                         f"{resolved['sizes']}")
    method, _engine = make_method(cfg, sizes, seed, hparams)
    available = [s for s in method.info.uncertainty_scores if s in OOD_SCORES]
    if scores is None:  # the run's own scores, those the method gives
        wanted = [s for s in cfg.ood_scores if s in available]
    else:
        wanted = list(scores)
        for s in wanted:
            if s not in available:
                raise ValueError(f"score {s!r}: {cfg.method} gives {available}")
    ood_x = bench.ood_set() if (ood and wanted) else None
    if ood and wanted and ood_x is None and scores is not None:
        raise ValueError(f"benchmark {cfg.benchmark!r} has no OOD set to score {list(scores)} against")
    from bimu.methods import get_method
    from bimu.methods.footprint import check_eval_memory

    n_eval = eval_samples if eval_samples is not None else (
        cfg.eval_samples if cfg.eval_samples is not None else hparams.get("n_eval_samples", 1))
    check_eval_memory(get_method(cfg.method), sizes, n_eval, cfg.eval_batch_size)
    try:
        ckpt = check_checkpoint_state(rd.load_checkpoint(), rd.file(CHECKPOINT), cfg.tasks)
    except Exception as e:  # noqa: BLE001 - torch.load of a torn file raises OSError, RuntimeError, EOFError, ...
        if isinstance(e, CheckpointError) and ": refused:" in str(e):  # code, NaN, impossible counters
            raise
        raise ValueError(f"{rd.path / 'checkpoint.pt'} cannot be read: truncated or corrupt "
                         f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    n = int(ckpt.get("n_tasks", 0))
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{rd.path}: checkpoint format {ckpt.get('format')}, this bimu reads {CHECKPOINT_FORMAT}")
    current = int(ckpt["task"])
    chosen = parse_tasks(tasks, current=current, n_tasks=n)
    method.load_state_dict(ckpt["method_state"])
    if ood_x is not None and cfg.test_limit is not None:
        ood_x = ood_x[:cfg.test_limit]
    s_out = None
    if ood_x is not None:
        s_out = evaluate_ood(method, ood_x, seed=seed, after_task=current, batch_size=cfg.eval_batch_size,
                             n_samples=eval_samples, scores=wanted)
    rows = []
    for j in chosen:
        preds: list | None = [] if chance else None
        acc, s_in = evaluate_test_task(method, bench, j, seed=seed, after_task=current, test_limit=cfg.test_limit,
                                       batch_size=cfg.eval_batch_size, n_samples=eval_samples,
                                       scores=wanted if s_out else (), predictions=preds)
        auc = {s: metrics.roc_auc(s_in[s], s_out[s]) for s in wanted} if s_out else None
        level = chance_level(*preds, bench.n_classes) if chance else {}
        rows.append({"task": j, "task_number": j + 1, "acc": acc, "ood_auc": auc, **level})
    return {"run_dir": str(rd.path), "after_task": current, "after_task_number": current + 1,
            "options": dict(options or {}), "scores": wanted,
            "eval_samples": eval_samples, "tasks": rows, "mean": _means(rows, wanted if s_out else [])}


def chance_level(pred, labels, n_classes: int) -> dict[str, Any]:
    """The accuracy of predictions ``pred`` if they were independent of ``labels`` (``sum_c`` share of
    predictions in ``c`` times share of labels in ``c``), the most predicted class and its share.

    >>> chance_level([2, 2, 2, 0], [0, 1, 2, 2], 3)
    {'chance': 0.4375, 'top_class': 2, 'top_share': 0.75}
    """
    pred, labels = np.asarray(pred, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    shares = np.bincount(pred, minlength=n_classes) / max(len(pred), 1)
    freq = np.bincount(labels, minlength=n_classes) / max(len(labels), 1)
    top = int(np.argmax(shares))
    return {"chance": float(shares @ freq), "top_class": top, "top_share": float(shares[top])}


def _means(rows, scores) -> dict[str, Any]:
    def stat(values):
        v = [float(x) for x in values]
        out = {"mean": float(np.mean(v))}
        if len(v) > 1:
            out["sd"] = float(np.std(v, ddof=1))
        return out

    res = {"acc": stat(r["acc"] for r in rows)}
    if rows and "chance" in rows[0]:
        res["chance"] = stat(r["chance"] for r in rows)
    for s in scores:
        res[s] = stat(r["ood_auc"][s] for r in rows)
    return res


def format_result(res: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`evaluate_run`'s result (1-based task numbers)."""
    scores = list(res["scores"]) if res["tasks"] and res["tasks"][0]["ood_auc"] else []
    head = f"{res['run_dir']} (model after task {res['after_task'] + 1})"
    if res["options"]:
        head += ", options " + ", ".join(f"{k}={json.dumps(v)}" for k, v in res["options"].items())
    chance = bool(res["tasks"]) and "chance" in res["tasks"][0]
    extra = [f"{'chance %':>8}", f"{'most predicted':>14}"] if chance else []
    lines = [head, "  ".join([f"{'task':>6}", f"{'acc %':>7}", *extra, *(f"{s + ' AUC':>22}" for s in scores)])]
    for r in res["tasks"]:
        cells = [f"{100 * r['chance']:>8.2f}", f"{r['top_class']:>4} ({100 * r['top_share']:.1f}%)".rjust(14)] \
            if chance else []
        lines.append("  ".join([f"{r['task'] + 1:>6}", f"{100 * r['acc']:>7.2f}", *cells,
                                *(f"{r['ood_auc'][s]:>22.4f}" for s in scores)]))
    if len(res["tasks"]) > 1:
        def cell(d, scale, width, digits):
            txt = f"{scale * d['mean']:.{digits}f} ± {scale * d['sd']:.{digits}f}"
            return f"{txt:>{width}}"
        m = res["mean"]
        extra = [cell(m["chance"], 100, 8, 2), " " * 14] if chance else []
        lines.append("  ".join([f"{'mean':>6}", cell(m["acc"], 100, 7, 2), *extra,
                                *(cell(m[s], 1, 22, 4) for s in scores)]))
    return "\n".join(lines)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``bimu evaluate``: every seed directory given, in turn; ``--json`` writes all results atomically."""
    from bimu.atomic import atomic_write_text, check_new_file

    try:
        if args.json:
            check_new_file(args.json, overwrite=args.force)
        options = dict(parse_benchmark_option(o) for o in args.option)
        results = [evaluate_run(p, tasks=args.tasks, options=options, scores=args.ood_scores,
                                eval_samples=args.eval_samples, ood=not args.no_ood, data_dir=args.data_dir,
                                chance=args.chance, eval_sum=args.eval_sum)
                   for p in args.run_dirs]
    except (ValueError, FileNotFoundError) as e:
        print(f"bimu evaluate: {e}", file=sys.stderr)
        return 2
    for res in results:
        print(format_result(res))
    if args.json:
        atomic_write_text(args.json, json.dumps(results, indent=2) + "\n")
        print(f"written: {args.json}")
    return 0


def add_parser(subparsers) -> None:
    """Register ``evaluate`` on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "evaluate", help="score a run's checkpointed model again: other tasks, OOD preprocessing, samples",
        description="Load the model in each seed directory's checkpoint.pt (after its last completed task) "
                    "and measure accuracy and OOD ROC-AUC again, with the run's own evaluation generators "
                    "(nothing changed: the run's own numbers, to the bit). Nothing is trained.",
        epilog="Examples:\n"
               "  bimu evaluate runs/pmnist-mesu/seed-0 --tasks last-5\n"
               "  bimu evaluate runs/pmnist-mesu/seed-0 --option ood_unstandardised=true   # the paper code's OOD\n"
               "  bimu evaluate runs/pmnist-bimu/seed-* --eval-samples 25 --no-ood --json eval.json\n"
               "  bimu evaluate runs/pmnist-bimu/seed-0 --tasks 1-900 --no-ood --chance   # where forgotten tasks fall\n"
               "  bimu evaluate runs/pmnist-bimu/seed-0 --tasks all --no-ood --eval-sum grouped   # the faster sums",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", help="seed directories holding config.json and checkpoint.pt")
    p.add_argument("--tasks", nargs="+", default=["current"],
                   help="tasks whose test sets to score: current (default: the task the checkpoint is after), "
                        "all, last-N, task numbers from 1, or ranges A-B")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="benchmark option for evaluation (repeatable), e.g. ood_unstandardised=true")
    p.add_argument("--ood-scores", nargs="+", default=None, choices=OOD_SCORES,
                   help="uncertainty scores for the OOD AUC (default: the run's)")
    p.add_argument("--no-ood", action="store_true", help="accuracy only")
    p.add_argument("--chance", action="store_true",
                   help="also each task's chance level: the accuracy its predictions would have if they were "
                        "independent of the labels (where a forgotten task falls), and the most predicted class")
    p.add_argument("--eval-samples", type=int, default=None,
                   help="Monte Carlo samples per prediction (default: the method's)")
    p.add_argument("--eval-sum", default=None, choices=("dot8", "grouped"),
                   help="how the fused BiMU and BayesBiNN sum the evaluation (default: the run's; grouped is "
                        "faster and rounds differently, docs/performance.md)")
    p.add_argument("--data-dir", default=None, help="data directory (default: the run's, else $BIMU_DATA_DIR)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON (atomically; each task "
                                                             "as task, 0-based, and task_number, from 1)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    p.set_defaults(func=cmd_evaluate)
