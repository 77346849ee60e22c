"""``bimu reproduce NAME``: regenerate one of the paper's tables or figures (runs, then a report).

- :mod:`~bimu.reproduce.entries`: every entry (name -> :class:`~bimu.reproduce.spec.Entry`) and
  :func:`~bimu.reproduce.entries.reproduce`, which runs one and writes its report;
- :mod:`~bimu.reproduce.spec`: options, rows, entries, quantities and run folders;
- :mod:`~bimu.reproduce.pmnist`, :mod:`~bimu.reproduce.features`: the rows of the Permuted-MNIST and
  OpenLORIS-Object tables; :mod:`~bimu.reproduce.active_learning`: the active-learning entries;
  :mod:`~bimu.reproduce.figures`: figures and the learning-rate map;
- :mod:`~bimu.reproduce.runtable`: runs the rows and tabulates them beside the paper's numbers
  (:mod:`bimu.paper`), marking gaps explained in :mod:`~bimu.reproduce.gaps`;
- :mod:`~bimu.reproduce.table`: the table written as markdown, CSV and LaTeX;
- :mod:`~bimu.reproduce.results_page`: the manifest of each report and ``docs/results.md`` built from
  them (``bimu report --results-page``);
- :mod:`~bimu.reproduce.plan`: ``--dry-run``; :mod:`~bimu.reproduce.cli`: the command line.
"""
