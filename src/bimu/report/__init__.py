"""Tables and figures from run directories."""

from bimu.report.plots import plot_accuracy_per_task
from bimu.report.tables import PAPER_TABLE1, find_seed_dirs, load_run, markdown_table, report

__all__ = ["PAPER_TABLE1", "find_seed_dirs", "load_run", "markdown_table", "plot_accuracy_per_task", "report"]
