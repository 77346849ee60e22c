"""bimu's version, written once: the package metadata (pyproject.toml) and :data:`bimu.__version__` read it."""

__version__ = "0.1.0"
