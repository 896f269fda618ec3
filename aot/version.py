"""The compiler's version: one definition, read by `aot.__version__` and written into each manifest."""
__version__ = "0.1.0"
