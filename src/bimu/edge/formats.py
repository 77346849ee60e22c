"""The export formats of :mod:`bimu.edge.export` and the files each writes, in a module light enough for
the command line's choices.

>>> FORMATS, FORMAT_FILES["c-header"]
(('npz', 'c-header', 'c-learner'), ('bimu_model.h', 'bimu_infer.c'))
"""

FORMATS = ("npz", "c-header", "c-learner")
"""Export formats: a numpy archive of the packed network, a C header with a reference C inference file, or
the state of the C learner (a device that keeps learning, :mod:`bimu.edge.learner_export`)."""

FORMAT_FILES = {"npz": ("bimu_model.npz",), "c-header": ("bimu_model.h", "bimu_infer.c"),
                "c-learner": ("bimu_config.h", "bimu_export.h", "bimu_learn.h", "bimu_learn.c", "bimu_state.h",
                              "bimu_state.c")}
"""The files an export of each format writes into its output folder."""
