"""Loaded by `redline capture` through PYTHONPATH into the program it runs (and its Python children).

It installs the call recorder when REDLINE_CAPTURE names a capture plan, then hands over to the
`sitecustomize` that the program would have loaded without redline, if there is one.
"""

import os
import sys


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("REDLINE_CAPTURE"):
    import _redline_capture

    _redline_capture.install(os.environ["REDLINE_CAPTURE"])
_chain()
