"""Hyperparameter search (``bimu tune``): Optuna maximising the paper's objective H on validation data.

- :mod:`bimu.tune.objective`: H (``H_t = w1 Acc_0 + w2 mean(Acc_0..Acc_t) + w3 Acc_t``) and its checks;
- :mod:`bimu.tune.config`: :class:`TuneConfig`, the settings of one worker, and the tuning options of
  a benchmark (its validation split: tuning never evaluates on the test set);
- :mod:`bimu.tune.spaces`: the search space of each method;
- :mod:`bimu.tune.evaluators`: what a trial runs (the runner's stream on the validation split, or a
  tiny synthetic stream);
- :mod:`bimu.tune.storage`: the study's storage (a journal file, or an RDB URL for many machines)
  and the trials whose worker died;
- :mod:`bimu.tune.journal`: the journal file of a study, in whole records, surviving a full disk;
- :mod:`bimu.tune.search`: :func:`run_tune`, one worker of a study under a trial budget, and the
  export of the best trial as a ``bimu run --config`` file;
- :mod:`bimu.tune.cli`: the ``bimu tune`` command.

Optuna is an optional dependency (``pip install 'bimu[tune]'``); it is imported inside functions, so
this package and the objective helpers work without it.
"""

from bimu.lazy import lazy_exports

_SUBMODULES = ("bimu.tune.config", "bimu.tune.evaluators", "bimu.tune.objective", "bimu.tune.search",
               "bimu.tune.storage")

__all__ = ["DEFAULT_WEIGHTS", "EVALUATORS", "INSTALL_HINT", "JOURNAL_FILENAME", "REDUCTIONS", "TuneConfig",
           "TuneResult", "TuneSetupError", "ValidationView", "best_config", "best_trial_info",
           "check_accuracy_matrix", "check_weights", "default_study_name", "fail_dead_local_trials", "h_from_row",
           "h_per_task", "journal_path", "make_storage", "objective_h", "postgres_driver_url", "redact_url",
           "resolve_evaluator", "run_tune", "runner_evaluate", "storage_kind", "synthetic_evaluate",
           "tune_benchmark_options", "write_json"]

__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULES, __all__)
