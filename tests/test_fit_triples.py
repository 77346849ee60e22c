"""``bimu.fit_stream`` on streams of (x, y, t) items, the form Avalanche and CapyMOA hand out: the
same run as the per-task (x, y) pairs of the same data, whatever the ids and their order."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from bimu.experiments.fit import as_benchmark, fit_stream

IDS = [5, 2, 9]  # task ids as a stream gives them: not 0..T-1, not sorted


def per_task(seed=0, n=40, m=15, d=12):
    """Three tasks of three classes (blobs around per-task centres): train and test ``(x, y)`` per task."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in IDS:
        centres = rng.normal(scale=2.0, size=(3, d))
        draw = lambda k: ((centres[(y := rng.integers(0, 3, k))] + rng.normal(size=(k, d))).astype(np.float32), y)
        out.append((draw(n), draw(m)))
    return [tr for tr, _ in out], [te for _, te in out]


def triples(tasks, ids=IDS):
    """All rows as ``(x, y, t)`` arrays, task after task."""
    return (np.concatenate([x for x, _ in tasks]), np.concatenate([y for _, y in tasks]),
            np.concatenate([np.full(len(y), i) for i, (_, y) in zip(ids, tasks)]))


class Experience(Dataset):
    """An Avalanche-style per-task dataset: items ``(x, y, t)`` with one task id throughout."""

    def __init__(self, x, y, t):
        self.x, self.y, self.t = torch.from_numpy(x), torch.from_numpy(y), t

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i], self.t


def same_run(a, b):
    np.testing.assert_array_equal(a.accuracy, b.accuracy)
    assert {k: v for k, v in a.summary.items() if "per_s" not in k and "seconds" not in k} == \
        {k: v for k, v in b.summary.items() if "per_s" not in k and "seconds" not in k}
    for (ka, va), (kb, vb) in zip(a.method.model.state_dict().items(), b.method.model.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)


@pytest.mark.parametrize("method,kw", [("bimu", {}), ("sgd", {"lr": 0.05})])
def test_triples_give_the_run_of_the_pairs_per_task(method, kw):
    train, test = per_task()
    ref = fit_stream(train, test, method, hidden=[8], engine="torch", **kw)
    assert ref.accuracy.shape == (3, 3) and ref.accuracy[-1, -1] > 0.6
    x, y, t = triples(train)
    loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(t)), batch_size=7)
    forms = [
        (triples(train), triples(test)),                                      # (x, y, t) arrays
        (loader, triples(test)),                                              # a DataLoader of triple batches
        (zip(x, y, (f"task-{v}" for v in t)), zip(*triples(test)[:2], (f"task-{v}" for v in triples(test)[2]))),
        # examples one by one, string ids
    ]
    for tr, te in forms:
        same_run(fit_stream(tr, te, method, hidden=[8], engine="torch", **kw), ref)


def test_interleaved_ids_are_grouped_by_first_appearance_keeping_each_tasks_order():
    train, test = per_task(seed=1)
    x, y, t = triples(train)
    order = np.random.default_rng(0).permutation(len(y))
    order = np.concatenate([[np.flatnonzero(t == 9)[0]], order[order != np.flatnonzero(t == 9)[0]]])  # 9 first
    b = as_benchmark((x[order], y[order], t[order]), triples(test))
    tasks = list(dict.fromkeys(t[order].tolist()))
    assert tasks[0] == 9 and b.n_tasks == 3
    for k, task_id in enumerate(tasks):
        rows = order[t[order] == task_id]
        xs, ys = b.train_task(k, seed=0)
        np.testing.assert_array_equal(xs.numpy(), x[rows])
        np.testing.assert_array_equal(ys.numpy(), y[rows])
    # the same data as pairs per task, in that task order, is the same run
    grouped = [(x[order[t[order] == i]], y[order[t[order] == i]]) for i in tasks]
    tests = [test[IDS.index(i)] for i in tasks]
    same_run(fit_stream((x[order], y[order], t[order]), triples(test), "sgd", hidden=[8], engine="torch", lr=0.05),
             fit_stream(grouped, tests, "sgd", hidden=[8], engine="torch", lr=0.05))


def test_a_list_of_per_task_datasets_yielding_triples_is_the_list_of_pairs():
    train, test = per_task(seed=2)
    # class-incremental Avalanche experiences: task id 0 in every one; the list's order is the stream
    exps = [Experience(x, y, 0) for x, y in train]
    tests = [Experience(x, y, 0) for x, y in test]
    same_run(fit_stream(exps, tests, "sgd", hidden=[8], engine="torch", lr=0.05),
             fit_stream(train, test, "sgd", hidden=[8], engine="torch", lr=0.05))
    # a list of training tasks and a test stream with ids: the ids name the list's places 0, 1, 2
    xt, yt, _ = triples(test)
    b = as_benchmark(exps, (xt, yt, np.repeat([2, 0, 1], [len(y) for _, y in test])))
    assert b.n_tasks == 3


def test_ids_that_do_not_fit_are_refused_naming_them():
    train, test = per_task(seed=3, n=10, m=5)
    xt, yt, tt = triples(test)
    with pytest.raises(ValueError, match=r"test: task id 7 is not a task of the training stream \(its tasks: \[5, 2, 9\]\)"):
        as_benchmark(triples(train), (xt, yt, np.where(tt == 2, 7, tt)))
    x, y, t = triples(train)
    with pytest.raises(ValueError, match=r"train\[0\]: task ids \[0, 1\] in one entry of a list of tasks"):
        as_benchmark([(x[:20], y[:20], np.repeat([0, 1], 10))], test[:1])
    with pytest.raises(ValueError, match=r"train: 3 task ids for 30 labels"):
        as_benchmark((x, y, t[:3]), triples(test))
    with pytest.raises(ValueError, match=r"train: item 1 has 2 fields, the items before it 3"):
        as_benchmark([(x[0], y[0], 5), (x[1], y[1])].__iter__(), triples(test))
    with pytest.raises(ValueError, match=r"train: item 0 has 2 task ids for 3 labels"):
        as_benchmark(iter([(torch.from_numpy(x[:3]), torch.from_numpy(y[:3]), torch.tensor([5, 5]))]), triples(test))
