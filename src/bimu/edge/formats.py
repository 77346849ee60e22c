"""The export formats of :mod:`bimu.edge.export` and the files each writes, in a module light enough for
the command line's choices.

>>> FORMATS, FORMAT_FILES["c-header"]
(('npz', 'c-header'), ('bimu_model.h', 'bimu_infer.c'))
"""

FORMATS = ("npz", "c-header")
"""Export formats: a numpy archive of the packed network, or a C header with a reference C inference file."""

FORMAT_FILES = {"npz": ("bimu_model.npz",), "c-header": ("bimu_model.h", "bimu_infer.c")}
"""The files an export of each format writes into its output folder."""
