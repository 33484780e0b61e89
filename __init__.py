"""redline: hot code from real profiles, shown in the editor, made faster by a verified search."""

__version__ = "0.1.0"
