"""Tables and figures from run directories."""

from bimu.report.plots import plot_accuracy_matrix, plot_accuracy_per_task
from bimu.report.tables import find_seed_dirs, load_run, markdown_table, report

__all__ = ["find_seed_dirs", "load_run", "markdown_table", "plot_accuracy_matrix", "plot_accuracy_per_task", "report"]
