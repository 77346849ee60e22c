"""How the engine's threads wait (bimu.threads): the passive OpenMP policy set on import, torch's thread
count left alone by the engine's pool, and the fall back to one thread on a busy machine."""

import os
import subprocess
import sys

import numpy as np
import pytest

import bimu.threads as threads


def _python(code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    r = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_the_policy_is_set_where_unset_and_left_alone_otherwise():
    env = {}
    assert threads.passive_openmp(env) and env == {"OMP_WAIT_POLICY": "passive"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not threads.passive_openmp(env) and env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_importing_bimu_before_torch_makes_openmp_wait_passively_and_after_it_changes_nothing():
    code = "import {0}, {1}, os; print(os.environ.get('OMP_WAIT_POLICY'))"
    assert _python(code.format("bimu", "torch")) == ["passive"]
    assert _python(code.format("torch", "bimu")) == ["None"]
    assert _python(code.format("bimu", "torch"), OMP_WAIT_POLICY="active") == ["active"]


def test_the_engine_leaves_torch_on_the_threads_it_was_given():
    code = ("import bimu, torch; torch.set_num_threads(1)\n"
            "from bimu import create_method\n"
            "m = create_method('sgd', [12, 6, 3], seed=0, engine='fused')\n"
            "m.learn(torch.randn(1, 12), torch.tensor([1])); m.predict(torch.randn(4, 12))\n"
            "import numba; print(torch.get_num_threads(), numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS)")
    assert _python(code, NUMBA_NUM_THREADS="2") == ["1", "1", "2"]


def test_busy_counts_the_other_runnable_tasks_against_the_cores_left(monkeypatch):
    for runnable, cores, n, expected in ((1, 2, 2, False), (2, 2, 2, True), (3, 4, 2, False), (4, 4, 2, True),
                                         (9, 2, 1, False)):
        monkeypatch.setattr(threads, "_load", (-float("inf"), 0))
        monkeypatch.setattr(threads, "runnable_tasks", lambda r=runnable: r)
        assert threads.busy(n, cores) is expected, (runnable, cores, n)
    monkeypatch.setattr(threads, "runnable_tasks", lambda: 99)  # read again only after RECHECK_SECONDS
    assert threads.busy(2, 4) is True


@pytest.mark.skipif(__import__("numba").config.NUMBA_NUM_THREADS < 2, reason="needs a thread pool of 2")
def test_a_busy_machine_runs_two_thread_steps_on_one_with_the_same_results(monkeypatch):
    import bimu.engine.base as base
    from bimu.engine import create_fused
    from bimu.methods.bimu import BiMUMethod

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 12)).astype(np.float32), rng.integers(0, 3, 40)
    hp = BiMUMethod.resolve_hyperparameters({})
    lams = {}
    for is_busy in (False, True):
        monkeypatch.setattr(base, "busy", lambda n, cores=None, b=is_busy: b)
        m = create_fused("bimu", [12, 6, 3], 0, hp, threads=2)
        assert m._set_threads() == (1 if is_busy else 2) and m.threads == 2
        m.learn_many(x, y)
        lams[is_busy] = m.lam.copy()
    one = create_fused("bimu", [12, 6, 3], 0, hp, threads=1)
    one.learn_many(x, y)
    assert all(np.array_equal(lam, one.lam) for lam in lams.values())
