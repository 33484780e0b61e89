"""The redline language server (pygls): hotspots where the code is, and "Optimise hotspot"."""
