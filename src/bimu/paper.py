"""The paper's numbers, as it quotes them, and the methods' names, as it spells them.

Every number is a pair ``(mean, sd)``: ``sd`` is ``None`` where the paper prints no "±" (MMRR, memory
sizes, the points its text quotes); a cell the paper leaves empty ("-") is ``None``. A row of a table
is a dict from a quantity key (``acc``, ``auc``, ``mmrr``, ...) to such a pair. :func:`cell` prints a
pair as the paper does: :data:`DIGITS` decimals (two unless stated), an integer mean without decimals.

>>> cell(TABLE1["bimu"]["acc"]), cell(TABLE1["bimu"]["mmrr"]), cell(ACTIVATION[("synaptic-metaplasticity", "sign")]["auc"])
('90.30 ± 0.38', '139.47', '-')
>>> cells(BWT_PMNIST["bimu"])
{'acc': '90.30 ± 0.38', 'mmrr': '139.47', 'bwt': '-0.8187 ± 0.0014'}
>>> cells(OPENLORIS_AL_BASELINE), cell(OPENLORIS_VR_POINTS[1]["queried"], DIGITS["queried"])
({'acc': '87.76 ± 0.19', 'used': '100'}, '4.0')
"""

from __future__ import annotations

from collections.abc import Mapping

Number = tuple[float, float | None]
"""``(mean, sd)``; ``sd`` is ``None`` where the paper prints none."""

Row = Mapping[str, Number | None]
"""One row of a paper table: quantity key -> number (``None``: the paper's "-")."""

DIGITS: dict[str, int] = {"bwt": 4, "queried": 1}
"""Decimals the paper prints by quantity key (two for every other key)."""


def cell(value: Number | None, digits: int = 2) -> str:
    """The paper's printed cell: ``"m ± s"``, ``"m"`` without a std, ``"-"`` for ``None``; an integer
    mean is printed without decimals (the full-stream rows' "100").

    >>> cell((0.99, 0.0)), cell((100, None)), cell((-0.0009, 0.0001), 4)
    ('0.99 ± 0.00', '100', '-0.0009 ± 0.0001')
    """
    if value is None:
        return "-"
    mean, sd = value
    text = str(mean) if isinstance(mean, int) else f"{mean:.{digits}f}"
    return text if sd is None else f"{text} ± {sd:.{digits}f}"


def cells(row: Row) -> dict[str, str]:
    """Every cell of a paper row, printed with :data:`DIGITS` (quantity key -> text)."""
    return {k: cell(v, DIGITS.get(k, 2)) for k, v in row.items()}


RUNS = 5
"""Runs behind each of the paper's "mean ± std" (every table caption: "Mean ± std over 5 runs")."""

# ------------------------------------------------------------------------------------ methods
METHOD_ORDER = ("bimu", "bayesbinn", "synaptic-metaplasticity", "ste", "mesu", "ewc-online", "si", "sgd")
"""The methods of Table 1, in the paper's order (registered names)."""

METHOD_NAMES = {"bimu": "BiMU", "bayesbinn": "BayesBiNN", "synaptic-metaplasticity": "Syn. Meta.", "ste": "STE",
                "mesu": "MESU", "ewc-online": "EWC O.", "si": "SI", "sgd": "SGD"}
"""The methods as the paper's tables spell them."""

METHOD_FULL_NAMES = {"bimu": "BiMU", "bayesbinn": "BayesBiNN", "synaptic-metaplasticity": "Synaptic Metaplasticity",
                     "ste": "STE", "mesu": "MESU", "ewc-online": "Online EWC", "si": "Synaptic Intelligence",
                     "sgd": "SGD"}
"""The methods as the paper's text names them (``MethodInfo.paper_name``)."""

# ------------------------------------------------------------------------------------ Permuted MNIST
TABLE1: dict[str, Row] = {
    "bimu": {"acc": (90.30, 0.38), "auc": (0.99, 0.00), "mmrr": (139.47, None), "one_task": (94.67, 0.11)},
    "bayesbinn": {"acc": (41.12, 1.62), "auc": (0.57, 0.12), "mmrr": (2.04, None), "one_task": (93.22, 0.09)},
    "synaptic-metaplasticity": {"acc": (10.27, 0.01), "auc": None, "mmrr": (1.64, None), "one_task": (71.40, 1.48)},
    "ste": {"acc": (29.35, 0.96), "auc": (0.69, 0.04), "mmrr": (9.32, None), "one_task": (77.56, 1.35)},
    "mesu": {"acc": (91.69, 0.58), "auc": (0.95, 0.03), "mmrr": (261.10, None), "one_task": (96.10, 0.18)},
    "ewc-online": {"acc": (81.78, 0.82), "auc": (0.66, 0.11), "mmrr": (6.63, None), "one_task": (96.06, 0.11)},
    "si": {"acc": (74.41, 1.19), "auc": (0.66, 0.17), "mmrr": (5.11, None), "one_task": (95.55, 0.28)},
    "sgd": {"acc": (66.64, 2.70), "auc": (0.87, 0.05), "mmrr": (43.50, None), "one_task": (96.03, 0.34)},
}
"""Table 1 (1000-task Permuted MNIST, 100 hidden units): mean accuracy over the last 5 tasks, OOD AUC,
MMRR and single-task accuracy. The paper's OOD AUC std is over the tasks of one run (its code), not
over runs."""

MEMORY_WINDOW: dict[int | str, Row] = {
    100: {"acc": (27.09, 0.57), "auc": (0.99, 0.00), "mmrr": (216.45, None)},
    400: {"acc": (73.46, 2.59), "auc": (1.00, 0.00), "mmrr": (574.72, None)},
    700: {"acc": (90.29, 0.24), "auc": (0.99, 0.01), "mmrr": (215.52, None)},
    1000: {"acc": (89.07, 0.28), "auc": (0.98, 0.01), "mmrr": (46.30, None)},
    1300: {"acc": (87.67, 0.33), "auc": (0.97, 0.02), "mmrr": (28.36, None)},
    1600: {"acc": (86.94, 0.29), "auc": (0.96, 0.02), "mmrr": (24.91, None)},
    1900: {"acc": (86.55, 0.24), "auc": (0.96, 0.02), "mmrr": (21.01, None)},
    100000: {"acc": (83.70, 0.30), "auc": (0.94, 0.05), "mmrr": (13.13, None)},
    "bayesbinn": {"acc": (67.91, 0.96), "auc": (0.75, 0.20), "mmrr": (5.03, None)},
}
"""Appendix "Memory window ablation" (tab:pmnist-memory-window; 100-task Permuted MNIST, 100 hidden
units): BiMU by memory window N, then BayesBiNN."""

ACTIVATION: dict[tuple[str, str], Row] = {
    ("bayesbinn", "sign"): {"acc": (66.40, 0.97), "auc": (0.54, 0.19), "mmrr": (5.85, None), "one_task": (90.27, 0.32)},
    ("bayesbinn", "rbg"): {"acc": (67.41, 1.03), "auc": (0.76, 0.17), "mmrr": (4.99, None), "one_task": (93.22, 0.09)},
    ("bimu", "sign"): {"acc": (81.78, 0.58), "auc": (0.76, 0.08), "mmrr": (22.25, None), "one_task": (92.89, 0.22)},
    ("bimu", "rbg"): {"acc": (90.29, 0.24), "auc": (0.99, 0.01), "mmrr": (215.52, None), "one_task": (94.67, 0.11)},
    ("mesu", "relu"): {"acc": (93.51, 0.18), "auc": (0.91, 0.03), "mmrr": (500.02, None), "one_task": (96.10, 0.18)},
    ("mesu", "rbg"): {"acc": (92.35, 0.21), "auc": (0.80, 0.05), "mmrr": (943.44, None), "one_task": (93.01, 0.20)},
    ("synaptic-metaplasticity", "sign"): {"acc": (10.22, 0.05), "auc": None, "mmrr": (9.92, None),
                                          "one_task": (71.40, 1.48)},
    ("synaptic-metaplasticity", "rbg"): {"acc": (11.35, 0.00), "auc": None, "mmrr": (26.29, None),
                                         "one_task": (13.20, 1.38)},
}
"""Appendix "Activation function ablation" (tab:gate-ablation; 100-task Permuted MNIST, 100 hidden
units), by (method, activation)."""

PMNIST_2000: dict[str, Row] = {
    "bimu": {"acc": (95.20, 0.26), "auc": (1.00, 0.00), "mmrr": (862.09, None)},
    "bayesbinn": {"acc": (86.61, 0.27), "auc": (0.80, 0.10), "mmrr": (9.86, None)},
    "synaptic-metaplasticity": {"acc": (10.34, 0.19), "auc": (0.00, 0.04), "mmrr": (1.33, None)},
    "ste": {"acc": (47.39, 1.35), "auc": (0.61, 0.10), "mmrr": (39.12, None)},
    "mesu": {"acc": (92.99, 0.71), "auc": (0.86, 0.02), "mmrr": (171.82, None)},
    "ewc-online": {"acc": (91.47, 0.31), "auc": (0.44, 0.14), "mmrr": (139.66, None)},
    "si": {"acc": (92.82, 0.49), "auc": (0.96, 0.04), "mmrr": (89.77, None)},
    "sgd": {"acc": (90.61, 1.32), "auc": (0.98, 0.02), "mmrr": (117.65, None)},
}
"""Appendix "Effect of Network Capacity" (tab:pmnist-results-2000neurons; 1000-task Permuted MNIST,
2000 hidden units)."""

BWT_PMNIST: dict[str, Row] = {
    "bimu": {"acc": (90.30, 0.38), "mmrr": (139.47, None), "bwt": (-0.8187, 0.0014)},
    "bayesbinn": {"acc": (41.12, 1.62), "mmrr": (2.04, None), "bwt": (-0.3897, 0.0021)},
    "synaptic-metaplasticity": {"acc": (10.27, 0.01), "mmrr": (1.64, None), "bwt": (-0.0009, 0.0001)},
    "ste": {"acc": (29.35, 0.96), "mmrr": (9.32, None), "bwt": (-0.5689, 0.0105)},
}
"""Appendix "Backward transfer clarifications" (tab:appendix-bwt-pm1000; 1000-task Permuted MNIST,
binary methods): last-5 accuracy, MMRR, BWT."""

MEMORY_MB: dict[str, Number] = {
    "bimu": (0.32, None), "bayesbinn": (0.64, None), "synaptic-metaplasticity": (1.84, None), "ste": (0.95, None),
    "mesu": (0.64, None), "ewc-online": (0.95, None), "si": (0.95, None), "sgd": (0.32, None),
}
"""Appendix "Training-state memory overhead" (784-100-10, 1000 tasks), in MB."""

# ------------------------------------------------------------------------------------ OpenLORIS-Object
OPENLORIS: dict[tuple[str, int], Row] = {
    ("bimu", 1024): {"mean_acc": (73.61, 1.53), "auc_alea": (0.96, 0.01), "auc_epi": (1.00, 0.00)},
    ("bimu", 8192): {"mean_acc": (89.19, 0.19), "auc_alea": (0.99, 0.00), "auc_epi": (1.00, 0.00)},
    ("bimu", 25088): {"mean_acc": (90.62, 0.22), "auc_alea": (0.93, 0.00), "auc_epi": (0.90, 0.00)},
    ("bayesbinn", 1024): {"mean_acc": (72.01, 1.69), "auc_alea": (0.93, 0.01), "auc_epi": (1.00, 0.00)},
    ("bayesbinn", 8192): {"mean_acc": (86.93, 0.41), "auc_alea": (0.99, 0.00), "auc_epi": (1.00, 0.00)},
    ("bayesbinn", 25088): {"mean_acc": (89.37, 0.77), "auc_alea": (0.92, 0.00), "auc_epi": (0.90, 0.01)},
    ("synaptic-metaplasticity", 1024): {"mean_acc": (62.82, 2.31), "auc_alea": (0.72, 0.04), "auc_epi": None},
    ("synaptic-metaplasticity", 8192): {"mean_acc": (88.03, 0.38), "auc_alea": (0.63, 0.03), "auc_epi": None},
    ("synaptic-metaplasticity", 25088): {"mean_acc": (86.72, 0.34), "auc_alea": (0.55, 0.00), "auc_epi": None},
    ("ste", 1024): {"mean_acc": (52.88, 3.39), "auc_alea": (0.73, 0.02), "auc_epi": None},
    ("ste", 8192): {"mean_acc": (79.12, 1.39), "auc_alea": (0.61, 0.05), "auc_epi": None},
    ("ste", 25088): {"mean_acc": (83.79, 1.13), "auc_alea": (0.55, 0.00), "auc_epi": None},
    ("mesu", 1024): {"mean_acc": (80.82, 0.94), "auc_alea": (0.90, 0.01), "auc_epi": (0.99, 0.00)},
    ("mesu", 8192): {"mean_acc": (87.01, 0.69), "auc_alea": (1.00, 0.00), "auc_epi": (0.98, 0.00)},
    ("mesu", 25088): {"mean_acc": (87.84, 0.11), "auc_alea": (0.83, 0.00), "auc_epi": (0.86, 0.00)},
    ("ewc-online", 1024): {"mean_acc": (75.72, 0.87), "auc_alea": (0.97, 0.01), "auc_epi": None},
    ("ewc-online", 8192): {"mean_acc": (87.18, 0.58), "auc_alea": (1.00, 0.00), "auc_epi": None},
    ("ewc-online", 25088): {"mean_acc": (88.23, 0.05), "auc_alea": (0.79, 0.00), "auc_epi": None},
    ("si", 1024): {"mean_acc": (70.75, 0.57), "auc_alea": (0.95, 0.03), "auc_epi": None},
    ("si", 8192): {"mean_acc": (86.44, 0.64), "auc_alea": (1.00, 0.00), "auc_epi": None},
    ("si", 25088): {"mean_acc": (88.04, 0.03), "auc_alea": (0.83, 0.00), "auc_epi": None},
    ("sgd", 1024): {"mean_acc": (62.31, 1.80), "auc_alea": (0.50, 0.00), "auc_epi": None},
    ("sgd", 8192): {"mean_acc": (86.27, 0.51), "auc_alea": (1.00, 0.00), "auc_epi": None},
    ("sgd", 25088): {"mean_acc": (88.04, 0.03), "auc_alea": (0.83, 0.00), "auc_epi": None},
}
"""Table 2 (tab:openloris-features-rows; OpenLORIS-Object, linear head on frozen VGG19 features), by
(method, features): mean accuracy, aleatoric and epistemic OOD AUC."""

BWT_OPENLORIS: dict[str, Row] = {
    "bimu": {"mean_acc": (90.62, 0.22), "bwt": (-0.0525, 0.0027)},
    "bayesbinn": {"mean_acc": (89.37, 0.77), "bwt": (-0.0399, 0.0078)},
    "synaptic-metaplasticity": {"mean_acc": (86.72, 0.34), "bwt": (-0.0485, 0.0021)},
    "ste": {"mean_acc": (83.79, 1.13), "bwt": (-0.0790, 0.0157)},
    "mesu": {"mean_acc": (87.84, 0.11), "bwt": (-0.0515, 0.0012)},
    "ewc-online": {"mean_acc": (88.23, 0.05), "bwt": (-0.0452, 0.0003)},
    "si": {"mean_acc": (88.04, 0.03), "bwt": (-0.0517, 0.0004)},
    "sgd": {"mean_acc": (88.04, 0.03), "bwt": (-0.0517, 0.0004)},
}
"""Appendix "Backward transfer clarifications" (tab:appendix-bwt-openloris-25088; OpenLORIS-Object,
25,088 features): mean accuracy over all tasks and BWT (no MMRR in the paper)."""

STANDARDISED: dict[str, Row] = {
    "bimu": {"mean_acc": (90.98, 0.38), "auc_alea": (1.00, 0.00), "auc_epi": (1.00, 0.00)},
    "bayesbinn": {"mean_acc": (90.20, 0.13), "auc_alea": (1.00, 0.00), "auc_epi": (1.00, 0.00)},
    "ste": {"mean_acc": (77.69, 2.29), "auc_alea": None, "auc_epi": None},
    "synaptic-metaplasticity": {"mean_acc": (79.28, 0.85), "auc_alea": None, "auc_epi": None},
    "mesu": {"mean_acc": (92.55, 0.24), "auc_alea": (0.99, 0.00), "auc_epi": (0.99, 0.00)},
    "ewc-online": {"mean_acc": (92.34, 0.32), "auc_alea": (1.00, 0.00), "auc_epi": None},
    "si": {"mean_acc": (92.23, 0.30), "auc_alea": (1.00, 0.00), "auc_epi": None},
    "sgd": {"mean_acc": (92.31, 0.31), "auc_alea": (1.00, 0.00), "auc_epi": None},
}
"""Appendix "Effect of standardization" (tab:openloris-uncertainty-8192; OpenLORIS-Object, 8,192
standardised features), in the paper's row order."""

OPENLORIS_TRAIN_EXAMPLES: Number = (442_194, None)
"""OpenLORIS-Object's "total number of training examples" in the paper's appendix (the imbalanced
stream's length is not stated separately)."""

# ------------------------------------------------------------------------------------ active learning
ANIMALS_AL_BASELINE: Row = {"acc": (86.28, None), "used": (100, None)}
"""Animals (Sec. active learning, Fig. animals-bimu): the 100%-update baseline the text quotes
(overall accuracy %, data used %)."""

ANIMALS_VR_POINTS: tuple[Row, ...] = ({"acc": (84.46, None), "queried": (11, None)},
                                      {"acc": (87.12, None), "queried": (18, None)})
"""Animals: the VR points the text quotes (overall accuracy %, queried %)."""

ANIMALS_VR_RARE_GAIN: Row = {"rare_gain": (41, None), "queried": (11, None)}
"""Animals (Sec. active learning): "At the 11% labeling budget, VR improves low-frequency accuracy by 41
absolute points over random querying" (points, queried %)."""

OPENLORIS_AL_BASELINE: Row = {"acc": (87.76, 0.19), "used": (100, None)}
"""Imbalanced OpenLORIS-Object, 8,192 features: the 100%-update baseline (accuracy %, data used %) of
Fig. vgg19-8192, the K ablation and the budget-controller table ("Random querying, full stream")."""

OPENLORIS_VR_POINTS: tuple[Row, ...] = ({"acc": (88.70, None), "queried": (3.1, None)},
                                        {"acc": (90.91, None), "queried": (4.0, None)})
"""Imbalanced OpenLORIS-Object (Fig. vgg19-8192): the VR points the text quotes (accuracy %, queried %)."""

VR_SAMPLES: dict[int, list[tuple[tuple[int, ...], Row]]] = {
    2: [((1,), {"acc": (89.30, 0.88), "used": (3.30, 0.04)})],
    3: [((1,), {"acc": (90.61, 0.53), "used": (3.87, 0.05)}), ((2,), {"acc": (82.26, 1.15), "used": (1.62, 0.03)})],
    5: [((1,), {"acc": (88.85, 0.92), "used": (2.91, 0.16)}), ((2, 3), {"acc": (80.86, 1.90), "used": (1.47, 0.16)}),
        ((4,), {"acc": (52.21, 23.71), "used": (0.34, 0.19)})],
    10: [((1,), {"acc": (90.91, 0.98), "used": (3.97, 0.03)}), ((2, 3), {"acc": (88.70, 1.94), "used": (3.10, 0.31)}),
         ((4, 5), {"acc": (79.27, 4.00), "used": (1.37, 0.24)}), ((6,), {"acc": (44.02, 32.02), "used": (0.42, 0.39)}),
         ((7,), {"acc": (9.37, 8.22), "used": (0.02, 0.04)}), ((8, 9), {"acc": (5.26, 0.00), "used": (0.00, 0.00)})],
    25: [((1,), {"acc": (91.34, 0.50), "used": (5.63, 0.09)}), ((3,), {"acc": (91.11, 0.44), "used": (4.40, 0.04)}),
         ((4,), {"acc": (90.93, 0.70), "used": (4.03, 0.05)}), ((5,), {"acc": (90.23, 0.68), "used": (3.65, 0.14)}),
         ((6,), {"acc": (89.00, 0.64), "used": (3.27, 0.23)}), ((7,), {"acc": (87.16, 1.88), "used": (2.93, 0.36)}),
         ((8,), {"acc": (86.40, 2.68), "used": (2.61, 0.44)}), ((9,), {"acc": (79.14, 13.18), "used": (1.96, 0.78)}),
         ((10,), {"acc": (66.41, 30.90), "used": (1.48, 0.84)}), ((11,), {"acc": (51.53, 37.93), "used": (1.03, 0.88)}),
         ((12,), {"acc": (34.82, 36.25), "used": (0.52, 0.65)}), ((13,), {"acc": (19.95, 29.37), "used": (0.23, 0.45)}),
         ((14,), {"acc": (19.16, 27.79), "used": (0.17, 0.34)}), ((15,), {"acc": (18.48, 26.44), "used": (0.13, 0.26)}),
         ((16,), {"acc": (17.01, 23.49), "used": (0.10, 0.19)}), ((17,), {"acc": (16.07, 21.61), "used": (0.07, 0.14)}),
         (tuple(range(18, 25)), {"acc": (5.26, 0.00), "used": (0.00, 0.00)})],
}
"""Appendix tab:appendix-variation ratio (imbalanced OpenLORIS-Object): K -> rows of (vote counts n of
the threshold n / K that the row merges, accuracy %, data used %). Its threshold 0.04 n for K = 25;
n = 2 (0.08) is not listed there."""

BUDGET: dict[tuple[float, float], Row] = {
    (0.005, 0.01): {"used": (0.50, 0.00), "acc": (52.68, 2.29)}, (0.005, 0.10): {"used": (1.11, 0.03), "acc": (79.84, 0.65)},
    (0.005, 0.50): {"used": (3.34, 0.05), "acc": (89.62, 0.43)},
    (0.01, 0.01): {"used": (1.00, 0.00), "acc": (61.95, 1.95)}, (0.01, 0.10): {"used": (1.22, 0.01), "acc": (79.53, 1.40)},
    (0.01, 0.50): {"used": (3.34, 0.05), "acc": (89.88, 0.57)},
    (0.02, 0.01): {"used": (2.00, 0.01), "acc": (70.20, 1.72)}, (0.02, 0.10): {"used": (2.03, 0.01), "acc": (85.64, 1.21)},
    (0.02, 0.50): {"used": (3.70, 0.02), "acc": (89.97, 0.74)},
    (0.03, 0.01): {"used": (3.00, 0.01), "acc": (73.90, 0.60)}, (0.03, 0.10): {"used": (3.00, 0.01), "acc": (86.79, 0.71)},
    (0.03, 0.50): {"used": (3.96, 0.03), "acc": (90.79, 0.61)},
    (0.04, 0.01): {"used": (4.00, 0.01), "acc": (76.97, 0.76)}, (0.04, 0.10): {"used": (4.00, 0.01), "acc": (87.94, 0.30)},
    (0.04, 0.50): {"used": (4.23, 0.03), "acc": (90.56, 0.30)},
    (0.05, 0.01): {"used": (5.00, 0.01), "acc": (78.34, 0.60)}, (0.05, 0.10): {"used": (5.00, 0.01), "acc": (87.66, 0.85)},
    (0.05, 0.50): {"used": (5.01, 0.01), "acc": (90.87, 0.51)},
}
"""Appendix tab:adaptive-threshold-openloris (VR, K = 10, imbalanced OpenLORIS-Object, 8,192 features):
(target budget B, exponent gamma) -> data used %, accuracy %."""

QUERY_DYNAMICS: dict[str, Row] = {
    "1": {"first_quarter": (25.43, 31.15), "middle": (40.19, 29.00), "last_quarter": (13.08, 12.57)},
    "2": {"first_quarter": (41.00, 20.55), "middle": (41.82, 11.01), "last_quarter": (15.66, 9.49)},
    "3": {"first_quarter": (53.47, 1.72), "middle": (33.85, 1.05), "last_quarter": (10.95, 1.35)},
    "4": {"first_quarter": (58.65, 1.75), "middle": (29.72, 1.47), "last_quarter": (9.81, 1.37)},
    "5": {"first_quarter": (61.35, 1.65), "middle": (29.07, 1.63), "last_quarter": (7.67, 1.26)},
    "6": {"first_quarter": (56.65, 3.22), "middle": (32.93, 2.51), "last_quarter": (8.26, 1.02)},
    "7": {"first_quarter": (42.37, 2.68), "middle": (40.33, 2.30), "last_quarter": (14.96, 0.79)},
    "8": {"first_quarter": (41.28, 4.12), "middle": (42.43, 3.22), "last_quarter": (14.60, 1.55)},
    "9": {"first_quarter": (42.83, 2.84), "middle": (40.16, 1.31), "last_quarter": (14.76, 2.30)},
    "10": {"first_quarter": (40.73, 1.84), "middle": (43.60, 1.14), "last_quarter": (13.65, 2.15)},
    "11": {"first_quarter": (39.53, 2.58), "middle": (42.64, 1.02), "last_quarter": (15.13, 2.02)},
    "12": {"first_quarter": (46.93, 2.25), "middle": (39.01, 1.72), "last_quarter": (12.19, 1.45)},
    "Average": {"first_quarter": (45.85, 9.70), "middle": (37.98, 4.95), "last_quarter": (12.56, 2.66)},
}
"""Appendix tab:openloris-querying-dynamics, part (b): task -> share of its VR updates (%) in the
first quarter of its examples (0-24%), the middle (25-73%) and the last quarter (74-99%)."""

QUERY_DYNAMICS_ACCURACY: dict[str, Row] = {
    "1": {"0": (5.26, 0.00), "25": (86.40, 12.42), "50": (90.53, 6.55), "75": (92.54, 4.96), "99": (90.26, 4.30)},
    "2": {"0": (5.26, 0.00), "25": (92.72, 3.96), "50": (92.50, 4.16), "75": (93.03, 2.93), "99": (91.01, 2.79)},
    "3": {"0": (8.73, 6.93), "25": (94.21, 1.19), "50": (89.82, 0.58), "75": (89.47, 1.68), "99": (88.11, 1.78)},
    "4": {"0": (8.90, 7.28), "25": (75.53, 3.06), "50": (94.61, 2.59), "75": (95.96, 1.19), "99": (91.93, 1.32)},
    "5": {"0": (12.68, 9.56), "25": (55.18, 2.04), "50": (95.44, 0.93), "75": (94.65, 0.97), "99": (90.00, 1.28)},
    "6": {"0": (11.45, 10.22), "25": (37.85, 3.13), "50": (93.51, 1.74), "75": (91.54, 2.68), "99": (81.14, 1.21)},
    "7": {"0": (18.60, 17.69), "25": (66.10, 4.36), "50": (80.88, 3.11), "75": (91.89, 0.31), "99": (90.31, 0.78)},
    "8": {"0": (18.25, 16.71), "25": (68.33, 2.48), "50": (80.44, 2.69), "75": (96.45, 0.95), "99": (93.60, 0.97)},
    "9": {"0": (12.32, 8.70), "25": (39.61, 2.42), "50": (53.25, 2.05), "75": (91.54, 1.36), "99": (80.96, 1.06)},
    "10": {"0": (19.78, 17.86), "25": (68.82, 3.38), "50": (70.79, 2.00), "75": (83.25, 1.57), "99": (89.78, 1.40)},
    "11": {"0": (21.32, 19.67), "25": (64.61, 5.02), "50": (72.06, 2.27), "75": (76.18, 1.36), "99": (92.37, 1.08)},
    "12": {"0": (14.87, 11.93), "25": (42.11, 2.14), "50": (41.58, 2.92), "75": (42.37, 1.25), "99": (94.25, 2.00)},
    "Average": {"0": (13.12, 5.29), "25": (65.96, 18.73), "50": (79.62, 16.68), "75": (86.57, 14.40), "99": (89.48, 4.10)},
}
"""Appendix tab:openloris-querying-dynamics, part (a): task -> accuracy (%) at checkpoints inside the
task, keyed by the percent of its examples streamed (Acc@0, @25, @50, @75, @99)."""


def paper_vr_samples(k: int, n: int) -> tuple[str, str]:
    """The paper's (accuracy, data used) cells of the K ablation at threshold ``n / k``; ``("-", "-")``
    if the paper lists no such row."""
    for ns, row in VR_SAMPLES.get(int(k), []):
        if int(n) in ns:
            c = cells(row)
            return c["acc"], c["used"]
    return "-", "-"


def paper_points(baseline: Row, vr_points) -> dict[str, str]:
    """The paper column of an accuracy-vs-queried table: the 100%-update baseline and the VR points its
    text quotes, by query rule.

    >>> paper_points(ANIMALS_AL_BASELINE, ANIMALS_VR_POINTS)["vr"]
    '84.46 at 11% queried; 87.12 at 18% queried'
    """
    base = cells(baseline)
    return {"all": f"{base['acc']} ({base['used']}% queried)",
            "vr": "; ".join(f"{c['acc']} at {c['queried']}% queried" for c in map(cells, vr_points))}
