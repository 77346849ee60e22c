"""Jobs on a real Dask cluster on loopback (``dask scheduler`` + ``dask worker`` processes)."""

import operator

import pytest

pytest.importorskip("distributed")

from bimu.experiments.distributed import check_address  # noqa: E402
from bimu.experiments.parallel import Job, run_jobs  # noqa: E402

from dask_cluster import LoopbackCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LoopbackCluster(tmp_path_factory.mktemp("dask"), n_workers=2) as c:
        yield c


def test_jobs_run_on_the_workers_and_failures_are_isolated(cluster, tmp_path, capsys):
    lines = []
    jobs = [Job("ok", int, ("0",)), Job("nonzero", int, ("3",)), Job("raises", operator.truediv, (1, 0))]
    codes = run_jobs(jobs, scheduler=cluster.address, shared=tmp_path, log=lines.append, done=1)
    assert codes == {"ok": 0, "nonzero": 1, "raises": 1}
    assert lines[0].startswith(f"dask: scheduler {cluster.address}, dashboard http://127.0.0.1:")
    assert "2 workers; 3 runs submitted (1 already done)" in lines[0]
    failed = sorted(l for l in lines[1:] if "FAILED" in l)
    assert failed[0].startswith("job nonzero FAILED on ") and failed[0].endswith("exit code 3; the other jobs go on")
    assert failed[1].startswith("job raises FAILED on ") and "ZeroDivisionError: division by zero" in failed[1]


def test_a_worker_without_the_shared_folder_fails_the_task_naming_it(cluster, tmp_path):
    from distributed import Client

    from bimu.experiments.distributed import _remote

    missing = tmp_path / "not-mounted"  # run_jobs makes the folder here; a worker elsewhere may not see it
    with Client(cluster.address, set_as_default=False) as client:
        ok, host, message = client.submit(_remote, int, ("0",), str(missing), pure=False).result()
    assert not ok and message == (f"the shared output folder {missing} is not mounted on worker {host} "
                                  "(every worker must see it at the same path)")
    lines = []
    assert run_jobs([Job("a", int, ("0",))], scheduler=cluster.address, shared=missing, log=lines.append) == {"a": 0}
    assert missing.is_dir()


def test_bad_addresses_fail_in_one_line_before_any_work():
    with pytest.raises(ValueError, match=r"^--scheduler: 'http://x:1' is not a Dask scheduler address"):
        run_jobs([Job("a", int, ("0",))], scheduler="http://x:1")
    with pytest.raises(ValueError, match=r"^--scheduler: no Dask scheduler answered at tcp://127.0.0.1:9 within"):
        run_jobs([Job("a", int, ("0",))], scheduler="127.0.0.1:9")
    assert check_address("localhost:8786") == "tcp://localhost:8786"


def test_a_threshold_sweep_on_the_cluster_gives_the_local_rows(cluster):
    import json

    from test_active_sweep import HP, toy_benchmark

    from bimu.experiments.sweep import sweep

    kw = dict(scores=["vr", "random"], grids={"vr": [0.1], "random": [0.3]}, seeds=[0, 1], mc_samples=4, hparams=HP)
    local = sweep(toy_benchmark(n_tasks=1, n=40), "bimu", **kw)
    remote = sweep(None, "bimu", **kw, scheduler=cluster.address, load=(toy_benchmark, (1, 40)))
    assert len(remote) == 2 * 3
    assert json.dumps(remote, sort_keys=True) == json.dumps(local, sort_keys=True)
