"""Redundancy of the objects-seq stream (docs/objects-seq.md, "Measured statistics").

Per task, on the training frames (all backbone features, from the feature cache; extracts what is
missing): mean cosine similarity of consecutive frames of a recording, of random pairs, of pairs from
the same recording, from two instances of one class and from two classes; and, for each test frame,
whether its nearest training frame (cosine) is of the same instance.

    BIMU_DATA_DIR=... python scripts/objects_seq_stats.py [--data-seed 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bimu.data.feature_benchmarks import _Extractor, recording_features
from bimu.data.objects_seq import FRAMES_PER_RECORDING, N_TASKS, objects_seq_plan


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def task_stats(plan, features, t: int, rng: np.random.Generator, pairs: int = 20000) -> dict[str, float]:
    """Similarity statistics of task ``t``."""
    def stack(items):
        items = [(i, f) for i, f in items if len(f)]
        X = _unit(np.concatenate([features(t, i, f) for i, f in items]))
        inst = np.concatenate([np.full(len(f), i) for i, f in items])
        return X, inst, np.array([plan["instances"][i]["label"] for i in inst]), np.concatenate([f for _, f in items])

    X, inst, lab, frame = stack(plan["train"][t])
    consecutive = (inst[1:] == inst[:-1]) & (np.diff(frame) == 1)
    cons = (X[:-1] * X[1:]).sum(1)[consecutive]
    a, b = rng.integers(0, len(X), pairs), rng.integers(0, len(X), pairs)
    sim = (X[a] * X[b]).sum(1)
    T, t_inst, _, _ = stack(plan["test"][t])
    near = (T @ X.T).argmax(1)
    return {"consecutive": float(cons.mean()), "consecutive_p5": float(np.percentile(cons, 5)),
            "random": float(sim.mean()), "same_recording": float(sim[(inst[a] == inst[b]) & (a != b)].mean()),
            "same_class_other_instance": float(sim[(lab[a] == lab[b]) & (inst[a] != inst[b])].mean()),
            "other_class": float(sim[lab[a] != lab[b]].mean()),
            "test_nearest_same_instance": float((inst[near] == t_inst).mean())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the statistics here")
    args = p.parse_args(argv)
    plan = objects_seq_plan(None, args.data_seed)
    features = recording_features(plan, _Extractor("efficientnet-lite0", None, None, None, 0), args.data_seed,
                                  FRAMES_PER_RECORDING)
    rng = np.random.default_rng(0)
    per_task = [task_stats(plan, features, t, rng) for t in range(N_TASKS)]
    mean = {k: float(np.mean([s[k] for s in per_task])) for k in per_task[0]}
    for t, s in enumerate(per_task):
        print(t, " ".join(f"{k}={v:.3f}" for k, v in s.items()))
    print("mean", " ".join(f"{k}={v:.4f}" for k, v in mean.items()))
    if args.json:
        from bimu.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps({"per_task": per_task, "mean": mean}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
