"""The process that runs reference or candidate code, inside the sandbox.

A standalone program (stdlib only at import; numpy / torch only if the target uses them), run with
the user's interpreter as `python .../redline_worker/__main__.py`. It reads a spec and then requests
as JSON lines on stdin and writes one JSON reply per request to the file descriptor named in the
spec. Everything the harness relies on (timer, encoder, checks) is bound in `state` *before* any
user or candidate code is imported, and an audit hook that user code cannot remove (`policy`)
records and blocks what candidates must not do. Its parts: `state` (bound originals, shared state),
`policy` (audit hook, tamper check, thread counting), `codec` (values as data, in the format
`encoded` describes, which the harness's comparison shares), `memory` (buffers, aliasing), `subject`
(loading the callable and its inputs), `cuda` (device timing, energy, hardware), `ops` (check, oracle,
reproduce, the locals' types, profile), `variants` (edge shapes and layouts), `keys` (what identifies an input, which a
guarded specialisation shares), `timing` (timed batches, energy windows), `main` (the loop).
"""
