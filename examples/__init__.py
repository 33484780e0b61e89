"""Bundled examples (`redline demo`)."""
