"""Run one candidate of tests/gpu/checked (or candidates) once on gelu_bias's inputs: the process
compute-sanitizer runs to record the logs in tests/fixtures/sanitizer (see its README)."""

import sys
from pathlib import Path

import torch

here = Path(__file__).parent
ns: dict = {}
exec(compile((here / "ops.py").read_text(), "ops.py", "exec"), ns)
exec(compile(Path(sys.argv[1]).read_text(), sys.argv[1], "exec"), ns)
x, b = ns["make_inputs"](0)
ns["gelu_bias"](x, b)
torch.cuda.synchronize()
