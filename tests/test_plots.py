"""Plot functions build figures with matplotlib's object API: they return the Figure, write it only when
given a path, and never switch the global backend (a notebook keeps its own)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from matplotlib.figure import Figure

from bimu.report.plots import (group_matrices, plot_accuracy_matrix, plot_accuracy_per_task, plot_accuracy_vs_queried,
                               plot_learning_rate_map, plot_probability_histograms)

R = np.array([[0.91, np.nan, np.nan], [0.82, 0.92, np.nan], [0.75, 0.80, 0.95]])


def every_plot(path_of):
    groups = {("pmnist", "bimu", (100,), None): [{"R": R}, {"R": R + 0.01}]}
    curves = {"VR": [{"query_fraction": 0.1, "accuracy": 0.5, "rare_accuracy": 0.2, "frequent_accuracy": 0.7}]}
    return [plot_accuracy_per_task(groups, path_of("a.png")), plot_accuracy_matrix(R, path_of("m.png")),
            plot_accuracy_vs_queried(curves, path_of("q.png")), plot_learning_rate_map(path_of("lr.png"), n=5),
            plot_probability_histograms({"BiMU": np.zeros(10)}, path_of("h.png"))]


def test_plots_leave_the_backend_alone_and_return_figures():
    """In a fresh interpreter with an explicitly chosen interactive-capable backend, every plot function
    returns a Figure, pyplot is never imported, and the backend is still the chosen one."""
    code = textwrap.dedent("""
        import sys, matplotlib
        matplotlib.use("svg")
        sys.path[:0] = [%r]
        import test_plots
        from matplotlib.figure import Figure
        figs = test_plots.every_plot(lambda name: None)
        print(all(type(f) is Figure for f in figs), matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
    """ % (str(__import__("pathlib").Path(__file__).parent),))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "svg", "False"]


def test_a_path_writes_the_png_and_no_path_writes_nothing(tmp_path):
    figs = every_plot(lambda name: tmp_path / name)
    assert all(isinstance(f, Figure) for f in figs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "h.png", "lr.png", "m.png", "q.png"]
    assert all((tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in ("a.png", "m.png"))
    every_plot(lambda name: None)
    assert len(list(tmp_path.iterdir())) == 5


def test_heatmap_holds_the_matrix_in_percent_with_blank_unevaluated_cells():
    fig = plot_accuracy_matrix(R, annotate=True)
    image = fig.axes[0].images[0]
    data = image.get_array()
    np.testing.assert_allclose(data.filled(-1), np.where(np.isnan(R), -1, 100 * R))
    assert data.mask.tolist() == np.isnan(R).tolist()
    assert image.get_clim() == (0.0, 100.0)
    # one label per evaluated cell, at (column, row) = (evaluated task, after task), 1-based
    texts = {(t.get_position(), t.get_text()) for t in fig.axes[0].texts}
    assert texts == {((1, 1), "91.0"), ((1, 2), "82.0"), ((2, 2), "92.0"), ((1, 3), "75.0"), ((2, 3), "80.0"),
                     ((3, 3), "95.0")}
    assert fig.axes[0].get_xlabel() == "evaluated task" and fig.axes[0].get_ylabel() == "after training on task"


def test_heatmap_of_several_groups_has_one_panel_each():
    groups = {("pmnist", "bimu", (100,), None): [{"R": R}, {"R": np.nan_to_num(R) + 0.02}],
              ("pmnist", "mesu", (100,), None): [{"R": R}]}
    mats = group_matrices(groups)
    assert list(mats) == ["bimu (pmnist, 100)", "mesu (pmnist, 100)"]
    np.testing.assert_allclose(mats["bimu (pmnist, 100)"][2], R[2] + 0.01)  # the seed mean
    fig = plot_accuracy_matrix(mats)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == list(mats)
    np.testing.assert_allclose(panels[1].images[0].get_array().filled(-1), np.where(np.isnan(R), -1, 100 * R))


def test_heatmap_rejects_a_matrix_that_is_not_square():
    with pytest.raises(ValueError, match=r"accuracy matrix : expected a non-empty square matrix, got shape \(2, 3\)"):
        plot_accuracy_matrix(np.zeros((2, 3)))


def test_a_point_that_queried_nothing_is_left_off_the_log_axis():
    curves = {"VR": [{"query_fraction": f, "accuracy": a, "rare_accuracy": a, "frequent_accuracy": a}
                     for f, a in ((0.0, 0.05), (0.01, 0.2), (0.1, 0.5))],
              "none": [{"query_fraction": 0.0, "accuracy": 0.05, "rare_accuracy": 0.0, "frequent_accuracy": 0.1}]}
    fig = plot_accuracy_vs_queried(curves)
    for ax in fig.axes:
        drawn = {c.get_label(): c.lines[0] for c in ax.containers}  # one errorbar container per curve
        assert list(drawn) == ["VR"]
        assert list(drawn["VR"].get_xdata()) == [1.0, 10.0]
        assert list(drawn["VR"].get_ydata()) == [100 * v for v in (0.2, 0.5)]
