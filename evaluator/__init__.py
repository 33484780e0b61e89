"""The optimise loop and everything that runs candidate code: sandbox, gate, timing, report.

Importing the package imports none of its modules (`redline capture` and the language server's start
import only what they use); the models are in `redline.evaluator.models`."""
