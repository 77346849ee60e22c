"""``bimu warmup`` and the one-line notice while kernels compile."""

from __future__ import annotations

import time

import pytest

from bimu import cli
from bimu.engine import notice
from bimu.experiments.warmup import warmup, warmup_plan


@pytest.fixture
def fresh_notice(monkeypatch):
    monkeypatch.setattr(notice, "NOTICE_AFTER", 0.05)
    monkeypatch.setattr(notice, "_announced", set())


def test_a_slow_call_is_announced_once_and_a_fast_one_never(fresh_notice, capsys):
    with notice.compile_notice("k", "the test kernel"):
        pass
    time.sleep(0.15)
    assert capsys.readouterr().err == ""
    for _ in range(2):
        with notice.compile_notice("k", "the test kernel"):
            time.sleep(0.3)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bimu: compiling the test kernel for this network")
    assert "bimu warmup" in err


def test_the_notice_watches_nested_calls_and_threads_without_a_thread_per_call(fresh_notice, capsys):
    import threading

    with notice.compile_notice("warm", "a warm kernel"):
        pass
    threads = threading.active_count()
    for _ in range(200):
        with notice.compile_notice("warm", "a warm kernel"):
            pass
    assert threading.active_count() == threads  # one watcher per process, not a timer per call
    with notice.compile_notice("outer", "the outer kernel"):
        with notice.compile_notice("inner", "the inner kernel"):
            pass
        time.sleep(0.3)  # the outer call is still watched after the inner one ends
    err = capsys.readouterr().err
    assert "the outer kernel" in err and "the inner kernel" not in err and "warm kernel" not in err
    assert notice._running == {}


def test_the_plan_covers_every_preset_k():
    plan = warmup_plan(["bimu", "sgd"])
    assert ("bimu", 5) in plan and ("bimu", 10) in plan and ("sgd", None) in plan
    assert len(plan) == len(set(plan))
    with pytest.raises(ValueError, match="no fused kernels for 'nope'"):
        warmup_plan(["nope"])


def test_warmup_runs_and_the_cli_refuses_unknown_methods(capsys):
    lines = []
    assert warmup(["sgd"], log=lines.append) == 1
    assert len(lines) == 1 and lines[0].startswith("sgd float32: ")
    capsys.readouterr()  # a compile notice of the warmup above, where it compiled
    assert cli.main(["warmup", "--methods", "nope"]) == 2
    assert capsys.readouterr().err.startswith("bimu: error: no fused kernels for 'nope'")


def test_warmup_compiles_the_grouped_evaluation_once_per_method(monkeypatch):
    from bimu.engine import fused

    calls = []
    real = fused.grouped_forward

    def counting(*args):
        calls.append(args[7])  # K
        return real(*args)

    monkeypatch.setattr(fused, "grouped_forward", counting)
    assert warmup(["bimu"], log=lambda line: None) == 2  # K = 5 and K = 10
    assert calls == [2]  # one grouped evaluation (n_samples=2), not one per K
