"""Online EWC on Permuted MNIST: bimu's online Fisher against the task-end Fisher of the paper's code,
and the paper's OOD protocol, over a short stream (the Table 1 gap study).

bimu's Online EWC accumulates each example's squared gradient while the task is learned (the stream is
online, nothing is kept) and averages them at the task end. The paper's code instead recomputes the
empirical Fisher at the task end, at the final parameters, over the task's whole training set (a second
pass over the task's data). ``--fisher task-end`` runs that variant: the fused Online EWC trains as
usual, and at each task end the accumulated sum is replaced by the task-end Fisher (exact mean of the
per-example squared gradients of the cross-entropy at the observed labels, every weight and bias),
before the usual ``F <- gamma F + F_task``. The method's defaults are not changed. ``--method sgd``
records only the OOD protocols, for plain SGD.

After every task the script also records, for the task just learned:

- ``fisher_ratio``: mean of bimu's online Fisher over mean of the task-end Fisher at the same
  parameters (both computed in every Online EWC run; the run uses the one ``--fisher`` names);
- the aleatoric OOD AUC against Fashion-MNIST standardised with MNIST's statistics (bimu's protocol)
  and divided by 255 only (the paper's code), each exact and with the paper's 1000-threshold metric.

The paper's Table 1 AUC is the mean over the stream of these per-task AUCs (one run), so the means over
tasks are printed at the end with the accuracy trajectory. One JSON line per task goes to ``--out`` as
the task ends, so a stopped run keeps the tasks it finished.

    BIMU_DATA_DIR=/work/shared/data python scripts/ewc_fisher_study.py --tasks 100 --seed 0 \\
        --fisher task-end --out /tmp/ewc-task-end.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from bimu import metrics
from bimu.engine.base import layer_pairs, views
from bimu.experiments.config import RunConfig
from bimu.experiments.runner import make_benchmark, make_method
from bimu.experiments.stream import evaluate, evaluate_test_task, run_stream
from bimu.experiments.tracking import Sink


def task_end_fisher(method, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Mean over ``(x, y)`` of the squared per-example gradient of the cross-entropy of a fused
    784-H-10 ReLU MLP at its current parameters, laid out like ``method.theta``."""
    w1, b1, w2, b2 = (torch.from_numpy(v.astype(np.float64)) for v in method.parameters_np())
    x = x.to(torch.float64)
    z1 = x @ w1.T + b1
    h = z1.clamp_min(0.0)
    p = torch.softmax(h @ w2.T + b2, dim=1)
    d2 = p - torch.nn.functional.one_hot(y, p.shape[1]).to(torch.float64)
    d1 = (d2 @ w2) * (z1 > 0)
    n = x.shape[0]
    grads = [(d1 * d1).T @ (x * x) / n, (d1 * d1).mean(0), (d2 * d2).T @ (h * h) / n, (d2 * d2).mean(0)]
    out = np.zeros_like(method.theta)
    L = len(method.sizes) - 1
    v = views(out, method._shapes)
    for dst, g in zip(layer_pairs(v[:L], v[L:]), grads):
        dst[...] = g.numpy()
    return out


def check_fisher(method, x: torch.Tensor, y: torch.Tensor) -> float:
    """Largest relative difference between :func:`task_end_fisher` and autograd, example by example."""
    w1, b1, w2, b2 = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in method.parameters_np())
    acc = [torch.zeros_like(t) for t in (w1, b1, w2, b2)]
    for i in range(len(y)):
        logits = torch.relu(x[i:i + 1].double() @ w1.T + b1) @ w2.T + b2
        gs = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, y[i:i + 1]), (w1, b1, w2, b2))
        for a, g in zip(acc, gs):
            a += g * g / len(y)
    ref = np.zeros_like(method.theta, dtype=np.float64)
    L = len(method.sizes) - 1
    v = views(ref, method._shapes)
    for dst, a in zip(layer_pairs(v[:L], v[L:]), acc):
        dst[...] = a.numpy()
    got = task_end_fisher(method, x, y)
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def summarize(rows: list[dict]) -> list[str]:
    """Lines of text: the accuracy right after training by stretch of tasks (numbered from 1, as the
    results page numbers them), then each AUC (and the Fisher ratio) as mean and sd over the tasks and
    at the last task."""
    diag = np.array([r["acc"] for r in rows])
    lines = [f"{len(rows)} tasks"]
    for lo, hi in ((0, 1), (1, 5), (5, 10), (10, 30), (30, 60), (60, 100)):  # tasks numbered from 1
        if len(diag) > lo:
            last = min(hi, len(diag))
            span = f"task {last}" if last == lo + 1 else f"tasks {lo + 1}-{last}"
            lines.append(f"  just-trained acc, {span}: {100 * diag[lo:hi].mean():.2f}")
    for key in ("auc_std", "auc_std_ref", "auc_raw", "auc_raw_ref", "fisher_ratio"):
        vals = np.array([r[key] for r in rows], dtype=float)
        lines.append(f"  {key}: mean over tasks {vals.mean():.3f} sd {vals.std():.3f} "
                     f"(range {vals.min():.3f}-{vals.max():.3f}), last task {vals[-1]:.3f}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", choices=("ewc-online", "sgd"), default="ewc-online",
                    help="sgd: only the OOD protocols (no Fisher)")
    ap.add_argument("--fisher", choices=("online", "task-end"), default="online")
    ap.add_argument("--out", help="JSON lines file, one line per task")
    ap.add_argument("--summarize", metavar="FILE", help="print the summary of a finished or stopped run's --out")
    ap.add_argument("--check", action="store_true", help="check the task-end Fisher against autograd first")
    args = ap.parse_args(argv)
    if args.summarize:
        with open(args.summarize, encoding="utf-8") as f:
            print("\n".join(summarize([json.loads(line) for line in f if line.strip()])))
        return 0
    if args.tasks is None or args.out is None:
        ap.error("--tasks and --out are needed to run")
    torch.set_num_threads(1)

    config = RunConfig.from_dict(dict(benchmark="pmnist", method=args.method, hidden=[100], seeds=[args.seed],
                                      tasks=args.tasks, engine="fused", threads=1, ood=True, ood_every=1,
                                      ood_scores=["aleatoric"]))
    bench = make_benchmark(config, args.seed)
    raw = RunConfig.from_dict(dict(config.to_dict(), benchmark_options={"ood_unstandardised": True}))
    ood_raw = make_benchmark(raw, args.seed).ood_set()
    _, hparams, _ = config.resolve_hparams()
    method, engine = make_method(config, [bench.n_features, 100, bench.n_classes], args.seed, hparams)
    if engine != "fused":
        raise SystemExit(f"the fused engine is needed, got {engine}")
    if args.method == "sgd" and args.fisher != "online":
        raise SystemExit("--fisher task-end needs --method ewc-online")
    if args.check:
        x, y = bench.train_task(0, args.seed)
        print(f"task-end Fisher vs autograd (200 examples): max relative difference "
              f"{check_fisher(method, x[:200], y[:200]):.2e}", flush=True)

    rows = []
    plain_task_end = method.task_end
    state = {"task": 0}

    def task_end():
        t = state["task"]
        x, y = bench.train_task(t, args.seed)
        fisher_end = task_end_fisher(method, x, y).astype(method.theta.dtype)
        online = method.acc / max(method.n_accumulated, 1)
        state["fisher_ratio"] = float(online.mean() / fisher_end.mean())
        state["fisher_end_mean"] = float(fisher_end.mean())
        state["fisher_online_mean"] = float(online.mean())
        if args.fisher == "task-end":
            method.acc[:] = fisher_end * method.n_accumulated
        plain_task_end()
        state["task"] = t + 1

    if args.method == "ewc-online":
        method.task_end = task_end
    else:
        state.update(fisher_ratio=float("nan"), fisher_end_mean=float("nan"), fisher_online_mean=float("nan"))

    out = open(args.out, "w", encoding="utf-8")
    records = []

    def on_task_end(t: int) -> None:
        _, s_in = evaluate_test_task(method, bench, t, seed=args.seed, after_task=t, scores=["aleatoric"])
        s_raw = evaluate(method, ood_raw, None, scores=["aleatoric"])[1]
        a, b = s_in["aleatoric"], s_raw["aleatoric"]
        rec = records[-1] if records and records[-1]["task"] == t else {}
        row = {"task": t, "acc": rec.get("acc"), "fisher_ratio": state["fisher_ratio"],
               "fisher_end_mean": state["fisher_end_mean"], "fisher_online_mean": state["fisher_online_mean"],
               "auc_std": rec["ood_auc"]["aleatoric"], "auc_std_ref": rec["ood_auc_reference"]["aleatoric"],
               "auc_raw": metrics.roc_auc(a, b), "auc_raw_ref": metrics.roc_auc_reference_1000_thresholds(a, b)}
        rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()

    class Records(Sink):
        """Keeps each task's record as the stream emits it (the task's accuracy and AUCs)."""

        def task_end(self, record, R):
            records.append(record)

    t0 = time.perf_counter()
    result = run_stream(bench, method, config.schedule, seed=args.seed, n_tasks=args.tasks, ood=True, ood_every=1,
                        ood_scores=["aleatoric"], on_task_end=on_task_end, progress=False, sinks=[Records()])
    out.close()
    R = result["R"]
    s = result["summary"]
    print(f"{args.method} fisher={args.fisher} seed={args.seed} ({time.perf_counter() - t0:.0f} s): last-5 "
          f"{100 * s['last_k_acc']:.2f}, mmrr {s['mmrr']:.2f}, final accuracy of the last 5 tasks "
          f"{np.round(100 * R[-1, -5:], 2).tolist()}")
    print("\n".join(summarize(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
