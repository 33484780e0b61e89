"""The process that runs reference or candidate code, inside the sandbox.

A standalone script (stdlib only at import; numpy / torch only if the target uses them), run with
the user's interpreter. It reads a spec and then requests as JSON lines on stdin and writes one
JSON reply per request to the file descriptor named in the spec. Everything the harness relies
on (timer, encoder, checks) is bound here *before* any user or candidate code is imported, and
an audit hook that user code cannot remove records and blocks what candidates must not do.
"""

from __future__ import annotations

import _thread
import base64
import contextlib
import gc
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import pickle
import sys
import sysconfig
import threading
import time
import traceback
import types
from typing import Any

_perf = time.perf_counter_ns
_type = type
_isinstance = isinstance
_len = len
_json_dumps = json.dumps
_b64 = base64.b64encode
_watched: dict[tuple[str, str], object] = {("time", "perf_counter"): time.perf_counter, ("time", "perf_counter_ns"): time.perf_counter_ns,
            ("time", "monotonic"): time.monotonic, ("time", "monotonic_ns"): time.monotonic_ns,
            ("time", "process_time"): time.process_time, ("time", "time"): time.time,
            ("gc", "collect"): gc.collect, ("json", "dumps"): json.dumps}
_violations: list[str] = []
_hook_on = False
_in_hook = False
_candidate_file = "<candidate>"  # the file the candidate's code runs from, once written
_scratch = ""
_writable: tuple[str, ...] = ()  # the scratch directory and, for trusted workers, the shared compiler cache
_allow_processes = False
_SECRET_PARTS = ("/.ssh", "/.aws", "/.gnupg", "/.netrc", "/.config/gcloud", "/.docker/config", "/.git-credentials",
                 "/etc/shadow", "/.env", "/.pypirc", "/.kube/config")


def _violation(msg: str) -> None:
    if msg not in _violations:
        _violations.append(msg)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    global _in_hook
    if not _hook_on or _in_hook:
        return
    _in_hook = True
    try:
        _check(event, args)
    finally:
        _in_hook = False


_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


def _called_from_candidate() -> bool:
    """Whether the candidate's own code caused the current event.

    Walking out from the event, standard-library frames (subprocess, os) are passed over; the
    first other frame decides: the candidate's code, or an installed library acting for it (Triton
    starting ptxas, numba loading its runtime), which may.
    """
    return _candidate_frame(sys._getframe(3))  # 0: here, 1: _check, 2: _audit, 3: what raised it


def _candidate_frame(frame: types.FrameType | None) -> bool:
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _candidate_file:
            return True
        if not (name.startswith(_STDLIB) and "site-packages" not in name) and name != __file__:
            return False
        frame = frame.f_back
    return False


def _check(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        if _isinstance(path, int):
            return
        p = os.fsdecode(path) if _isinstance(path, (str, bytes)) else str(path)
        full = os.path.abspath(p)
        writing = (mode and any(c in str(mode) for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if any(part in full for part in _SECRET_PARTS):
            _violation(f"read a secrets file ({full})")
            raise PermissionError(f"redline sandbox: {full} is off limits")
        if writing and not (any(full == w or full.startswith(w + os.sep) for w in _writable)
                            or full.startswith("/dev/")):
            _violation(f"wrote outside the scratch directory ({full})")
            raise PermissionError(f"redline sandbox: writing {full} is not allowed")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        _violation("tried to reach the network")
        raise PermissionError("redline sandbox: no network")
    elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty") and not _allow_processes and _called_from_candidate():
        _violation(f"started a process ({event})")
        raise PermissionError("redline sandbox: starting processes is not allowed")
    elif event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at",
                   "ctypes.addressof", "ctypes.call_function") and not _allow_processes \
            and _called_from_candidate():
        _violation(f"used ctypes to reach raw memory or native code ({event})")
        raise PermissionError("redline sandbox: ctypes is not allowed in candidates")
    elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        _violation(f"inspected the garbage collector ({event})")
        raise PermissionError("redline sandbox: gc introspection is not allowed")
    elif event == "sys._getframe":
        frame = args[0] if args else None
        code = getattr(frame, "f_code", None)
        if code is not None and code.co_filename == __file__:
            _violation("inspected the harness's stack frames")
            raise PermissionError("redline sandbox: the harness's frames are off limits")


# ---------------------------------------------------------------- values
_INLINE = 256 << 10
_blob_count = [0]


_harness_dirs: list[str] = []


def _harness_dir() -> str:
    """Where large values go when the harness (a test, a benchmark) encodes them itself, outside any
    worker: a private temporary directory, never the current one."""
    if not _harness_dirs:
        import atexit
        import shutil
        import tempfile

        _harness_dirs.append(tempfile.mkdtemp(prefix="redline-encode-"))
        atexit.register(shutil.rmtree, _harness_dirs[0], True)
    return _harness_dirs[0]


def _blob(data: bytes, digest: bool) -> dict[str, Any]:
    """Array bytes for the harness: inline when small, else a file in the scratch directory with
    its sha256 (the harness verifies it), or only the digest when only equality matters."""
    h = hashlib.sha256(data).hexdigest()
    if digest:
        return {"sha256": h}
    if _len(data) <= _INLINE:
        return {"b": _b64(data).decode()}
    _blob_count[0] += 1
    path = os.path.join(_scratch or _harness_dir(), f"blob-{_blob_count[0]}.bin")
    with open(path, "wb") as fh:
        fh.write(data)
    return {"file": path, "sha256": h}


# Arrays larger than this many elements are described by a sample of _SAMPLE_K elements, at
# positions drawn from a seed the harness sends with each request (the same for reference and
# candidate, fresh every request), plus exact float64 sums and NaN/inf counts over all elements:
# a 512 MB output then costs 1 MB to compare instead of a file the size of the tensor.
_SAMPLE_OVER = 1 << 22
_SAMPLE_K = 1 << 18
_sample_seed = [0]


def _sketch_torch(value: Any, name: str, dtype: str, digest: bool) -> dict[str, Any]:
    torch = sys.modules["torch"]
    flat = value.detach().reshape(-1)
    g = torch.Generator(device=flat.device).manual_seed(_sample_seed[0])
    idx = torch.randint(0, flat.numel(), (_SAMPLE_K,), device=flat.device, generator=g)
    sample = flat[idx]
    if flat.is_floating_point():
        stats: dict[str, Any] = {"nan": int(torch.isnan(flat).sum()), "inf": int(torch.isinf(flat).sum())}
        finite = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
        sample = sample.float()
    else:
        stats, finite = {"nan": 0, "inf": 0}, flat
    stats.update(seed=_sample_seed[0], n=int(flat.numel()), sum=float(finite.sum(dtype=torch.float64)),
                 abs_sum=float(finite.abs().sum(dtype=torch.float64)))
    arr = sample.cpu().numpy()
    return {"t": name, "dtype": arr.dtype.str, "torch_dtype": dtype, "shape": list(value.shape), "sampled": stats,
            **_blob(arr.tobytes(), digest)}


def _sketch_numpy(arr: Any, name: str, digest: bool) -> dict[str, Any]:
    np = sys.modules["numpy"]
    flat = arr.reshape(-1)
    idx = np.random.default_rng(_sample_seed[0]).integers(0, flat.size, _SAMPLE_K)
    sample = np.ascontiguousarray(flat[idx])
    if flat.dtype.kind in "fc":
        stats: dict[str, Any] = {"nan": int(np.isnan(flat).sum()), "inf": int(np.isinf(flat).sum())}
        finite = np.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
    else:
        stats, finite = {"nan": 0, "inf": 0}, flat
    stats.update(seed=_sample_seed[0], n=int(flat.size), sum=float(np.sum(finite, dtype=np.float64).real),
                 abs_sum=float(np.sum(np.abs(finite), dtype=np.float64)))
    return {"t": name, "dtype": sample.dtype.str, "shape": list(arr.shape), "sampled": stats,
            **_blob(sample.tobytes(), digest)}


def encode(value: Any, depth: int = 0, digest: bool = False) -> Any:
    """A JSON-able, exact description of a value: its exact type and its contents (with `digest`,
    arrays are described by their sha256 only: enough to tell whether inputs were changed)."""
    if depth > 50:
        raise ValueError("value nested too deeply")
    t = _type(value)
    name = f"{t.__module__}.{t.__qualname__}"
    if value is None or t in (bool, int, str):
        return {"t": name, "v": value}
    if t is float:
        return {"t": name, "v": repr(value)}
    if t is complex:
        return {"t": name, "v": [repr(value.real), repr(value.imag)]}
    if t is bytes:
        return {"t": name, "v": _b64(value).decode()}
    if t in (list, tuple):
        return {"t": name, "v": [encode(v, depth + 1, digest) for v in value]}
    if t is dict:
        return {"t": name, "v": [[encode(k, depth + 1, digest), encode(v, depth + 1, digest)] for k, v in value.items()]}
    if t in (set, frozenset):  # in a canonical order: two equal sets encode the same
        return {"t": name, "v": sorted((encode(v, depth + 1, digest) for v in value), key=_json_dumps)}
    np = sys.modules.get("numpy")
    if np is not None and t is np.ndarray:
        arr = np.ascontiguousarray(value)
        if arr.dtype.hasobject:
            return {"t": name, "object": True, "shape": list(arr.shape),
                    "v": [encode(v, depth + 1, digest) for v in arr.ravel().tolist()]}
        if arr.size > _SAMPLE_OVER:
            return _sketch_numpy(arr, name, digest)
        return {"t": name, "dtype": arr.dtype.str, "shape": list(arr.shape), **_blob(arr.tobytes(), digest)}
    if np is not None and _isinstance(value, np.generic) and t.__module__ == "numpy":
        return {"t": name, "dtype": value.dtype.str, "shape": [], "b": _b64(value.tobytes()).decode()}
    torch = sys.modules.get("torch")
    if torch is not None and t is torch.Tensor:
        dtype = str(value.dtype).replace("torch.", "")
        if value.numel() > _SAMPLE_OVER:
            return _sketch_torch(value, name, dtype, digest)
        cpu = value.detach().to("cpu")
        if cpu.dtype in (torch.bfloat16, torch.float16) or dtype.startswith("float8"):
            cpu = cpu.float()
        arr = cpu.contiguous().numpy()
        return {"t": name, "dtype": arr.dtype.str, "torch_dtype": dtype, "shape": list(arr.shape),
                **_blob(arr.tobytes(), digest)}
    state = getattr(value, "__dict__", None)
    if _type(state) is dict and not _isinstance(value, (types.ModuleType, types.FunctionType, type)):
        # A plain object: compared by its type and attributes.
        return {"t": name, "attrs": encode(dict(state), depth + 1, digest)}
    return {"t": name, "opaque": True}  # the harness can only compare its type


def buffers(value: Any) -> list[Any]:
    """Array-like buffers inside a value (to detect aliasing)."""
    out: list[Any] = []
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    stack = [value]
    while stack:
        v = stack.pop()
        t = _type(v)
        if t in (list, tuple):
            stack.extend(v)
        elif t is dict:
            stack.extend(v.values())
        elif (np is not None and t is np.ndarray) or (torch is not None and t is torch.Tensor) or _isinstance(v, (bytearray, memoryview)):
            out.append(v)
    return out


def tensor_storages(value: Any) -> list[Any]:
    """The distinct storages (by device and address) behind the torch tensors in `value`."""
    torch = sys.modules.get("torch")
    out: dict[tuple[str, int], Any] = {}
    if torch is not None:
        for t in buffers(value):
            if _type(t) is torch.Tensor and t.numel():
                st = t.untyped_storage()
                out.setdefault((str(t.device), st.data_ptr()), st)
    return list(out.values())


def flip_bits(storage: Any) -> bool:
    """Invert every bit of `storage` in place (on the current stream; twice restores it exactly).
    False where torch refuses the write (an inference-mode tensor's storage, say): that storage is
    then simply not held back."""
    torch = sys.modules["torch"]
    try:
        torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage).bitwise_not_()
    except Exception:
        return False
    return True


def shares(a: Any, b: Any) -> bool:
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    if torch is not None and _isinstance(a, torch.Tensor) and _isinstance(b, torch.Tensor):
        if a.device != b.device or a.numel() == 0 or b.numel() == 0:
            return False
        sa = a.untyped_storage()
        sb = b.untyped_storage()
        return bool(sa.data_ptr() == sb.data_ptr())
    if np is not None and _isinstance(a, np.ndarray) and _isinstance(b, np.ndarray):
        return bool(np.shares_memory(a, b))
    return a is b


def aliases(out: Any, args: tuple[Any, ...]) -> bool:
    ins = buffers(list(args))
    return any(shares(o, i) for o in buffers(out) for i in ins)


def describe(value: Any, depth: int = 0) -> str:
    """A short description of a value for the LLM's prompt: type, dtype, shape, device, layout."""
    t = _type(value)
    if value is None or t in (bool, int, float, complex):
        return f"{t.__name__} (e.g. {value!r})"
    if t in (str, bytes):
        return f"{t.__name__} of length {_len(value)}"
    if t in (list, tuple):
        if not value or depth > 2:
            return f"{t.__name__} of {_len(value)}"
        kinds = {describe(v, depth + 1) for v in value[:64]}
        inner = kinds.pop() if _len(kinds) == 1 else "mixed items"
        return f"{t.__name__} of {_len(value)} x {inner}"
    if t is dict:
        keys = ", ".join(repr(k) for k in list(value)[:8])
        return f"dict of {_len(value)} ({keys}{', ...' if _len(value) > 8 else ''})"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        parts = [f"{t.__module__.split('.')[0]}.{t.__name__}", str(dtype).replace("torch.", ""),
                 "shape (" + ", ".join(str(int(d)) for d in shape) + ("," if _len(shape) == 1 else "") + ")"]
        device = getattr(value, "device", None)
        if device is not None and str(device) != "cpu":
            parts.append(f"on {device}")
        contiguous = getattr(value, "is_contiguous", None)
        flags = getattr(value, "flags", None)
        if (callable(contiguous) and not contiguous()) or (flags is not None and not flags["C_CONTIGUOUS"]):
            parts.append("not contiguous")
        return " ".join(parts)
    return f"{t.__module__}.{t.__qualname__}"


def hardware() -> str:
    """What this worker runs on: the GPU (name, SMs, memory, measured copy bandwidth) or the CPU."""
    if _cuda is not None:
        props = _cuda.torch.cuda.get_device_properties(0)
        return (f"{props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, "
                f"measured copy bandwidth {_cuda.bandwidth / 1e12:.2f} TB/s")
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    import platform

    return f"{cpu or platform.machine()}, {os.cpu_count()} cores"


# ---------------------------------------------------------------- loading
def load_module(path: str, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_target_module(path: str, name: str) -> types.ModuleType:
    """The target's module: imported by its dotted name where that name finds this very file (so
    its package and relative imports work, and pickled objects of its classes are its own), else
    loaded from the file under `name`."""
    if "." in name:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.realpath(spec.origin) == os.path.realpath(path):
            return importlib.import_module(name)
    return load_module(path, name)


def consuming(fn: Any) -> Any:
    """A generator function's calls return the list of what it yields, and a coroutine function's what
    it returns when awaited (on one event loop kept for the worker): outcomes that can be compared."""
    if inspect.isgeneratorfunction(fn):
        def drain(*args: Any, **kwargs: Any) -> Any:
            return list(fn(*args, **kwargs))
        return drain
    if inspect.iscoroutinefunction(fn):
        import asyncio

        loop = asyncio.new_event_loop()

        def run(*args: Any, **kwargs: Any) -> Any:
            return loop.run_until_complete(fn(*args, **kwargs))
        return run
    return fn


class _Unpickler(pickle.Unpickler):
    """Captured objects whose classes lived in the program's `__main__` (or the target module under its
    runtime name) are made from the target module loaded here."""

    def __init__(self, subject: Subject) -> None:
        self.subject = subject

    def loads(self, data: bytes) -> Any:
        super().__init__(io.BytesIO(data))
        return self.load()

    def find_class(self, module: str, name: str) -> Any:
        if module in ("__main__", getattr(self.subject, "captured_module", None)):
            return resolve(self.subject.module, name)
        return super().find_class(module, name)


def resolve(obj: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class Subject:
    """The callable under test and how to make its inputs."""

    def __init__(self, spec: dict[str, Any]) -> None:
        global _hook_on
        self.spec = spec
        for p in reversed(spec["sys_path"]):
            if p not in sys.path:
                sys.path.insert(0, p)
        module = load_target_module(spec["file"], spec["module"])
        self.module = module
        qual = spec["qualname"]
        parts = qual.split(".")
        source = spec["inputs"]
        self.kernelbench = source["kind"] == "kernelbench"
        self.captured: list[bytes] = []
        self.make_inputs = None
        if source["kind"] == "make_inputs":
            inputs_mod = module if os.path.abspath(source["file"]) == os.path.abspath(spec["file"]) else \
                load_module(source["file"], "_redline_inputs")
            self.make_inputs = getattr(inputs_mod, source["func"])
        elif source["kind"] == "captured":
            self.captured_module = source["module"]
            for name in source["calls"]:
                with open(os.path.join(source["store"], name), "rb") as fh:
                    self.captured.append(fh.read())
        global _cuda
        if spec.get("device") == "cuda":
            _cuda = Cuda()
        code = spec.get("candidate")
        if code is not None:
            for mod_name in spec.get("preimport", []):
                try:
                    __import__(mod_name)
                except Exception:  # the candidate's own import will report it
                    pass
            # The candidate is a real module in a real file: Triton reads a @jit function's source
            # from its file, and torch.compile looks its module up in sys.modules.
            global _candidate_file
            cand_name = module.__name__ + "__candidate"
            _candidate_file = os.path.join(_scratch, cand_name.replace(".", "_") + ".py")
            with open(_candidate_file, "w") as fh:
                fh.write(code)
            cand_module = types.ModuleType(cand_name)
            namespace = cand_module.__dict__
            namespace.update({k: v for k, v in module.__dict__.items() if not k.startswith("__")})
            namespace.update(__name__=cand_name, __file__=_candidate_file, __package__=module.__package__)
            sys.modules[cand_name] = cand_module
            _hook_on = True
            compiled = compile(code, _candidate_file, "exec")
            exec(compiled, namespace)
            name = parts[-1]
            if name not in namespace or not callable(namespace[name]):
                raise NameError(f"the candidate does not define {name}()")
            fn = namespace[name]
            if len(parts) > 1:
                owner = resolve(module, ".".join(parts[:-1]))
                setattr(owner, name, fn)  # this process is the candidate's own
            else:
                module.__dict__[name] = fn
        _hook_on = True
        if self.kernelbench:
            self.model_cls = resolve(module, parts[0])
        self.fn = None if self.kernelbench else consuming(resolve(module, qual))

    def first_key(self) -> int:
        return 0 if self.captured else 12345

    def recorded(self, index: int) -> dict[str, Any]:
        """A captured call's file: `call` (pickled arguments) and `outcome` (see inputs/store.py)."""
        return _Unpickler(self).loads(self.captured[index])

    def inputs(self, seed: int) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        """Positional and keyword arguments for one call (fresh objects every time), and the callable.
        `seed` picks a captured call by its index, or seeds make_inputs."""
        _seed_all(seed)
        if self.captured:
            args, kwargs = _Unpickler(self).loads(self.recorded(seed)["call"])
            return tuple(args), dict(kwargs), self.fn
        if self.kernelbench:
            cuda = self.spec.get("device") == "cuda"
            # On CUDA the model and the inputs are made on the device itself (torch's default device):
            # a KernelBench get_inputs() of 16384x8192 random tensors takes seconds on the CPU.
            with sys.modules["torch"].device("cuda") if cuda else contextlib.nullcontext():
                init = self.module.get_init_inputs() if hasattr(self.module, "get_init_inputs") else []
                _seed_all(seed)
                model = self.model_cls(*init)
                _seed_all(seed + 1)
                args = self.module.get_inputs()
            if cuda:
                model = model.cuda()
                args = [a.cuda() if hasattr(a, "cuda") else a for a in args]
            return tuple(args), {}, model.forward if ".forward" in self.spec["qualname"] else model
        assert self.make_inputs is not None
        value = self.make_inputs(seed)
        args = value if _type(value) is tuple else (value,)
        return args, {}, self.fn


def _seed_all(seed: int) -> None:
    import random

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (2**32))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


class Cuda:
    """The harness's handles on CUDA, bound before candidate code runs (a candidate that replaces
    torch.cuda.synchronize cannot blind the harness, and the replacement is reported)."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.sync = torch.cuda.synchronize
        props = torch.cuda.get_device_properties(0)
        self.name = props.name
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
        # Written before every timed call: twice the L2 size evicts what the last call left there.
        self.flush = torch.empty(max(2 * l2 // 4, 1 << 20), dtype=torch.float32, device="cuda")
        self.bandwidth = self._copy_bandwidth()
        _watched[("torch.cuda", "synchronize")] = torch.cuda.synchronize
        _watched[("torch.cuda", "Event")] = torch.cuda.Event
        # The event class and its methods, bound now: a candidate that patches them later changes nothing.
        self.event, self.record, self.elapsed_ms = torch.cuda.Event, torch.cuda.Event.record, torch.cuda.Event.elapsed_time
        self.event_sync = torch.cuda.Event.synchronize
        self.current_stream = torch.cuda.current_stream
        self.spin = torch.cuda._sleep
        self.spin_hz = self._spin_rate()
        self.ahead_s = 200e-6  # how long the device is kept busy ahead of each call (see begin and op_time)
        self.drain_overhead_s = 0.0
        self.nvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        except Exception:  # NVML is optional: energy and clocks are then not reported
            self.nvml = None

    def _copy_bandwidth(self) -> float:
        """Device-to-device copy bandwidth, bytes read plus written per second (the plausibility ceiling)."""
        torch = self.torch
        src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        self.sync()
        t0 = _perf()
        for _ in range(10):
            dst.copy_(src)
        self.sync()
        dt = (_perf() - t0) * 1e-9
        return 2 * src.numel() * 10 / dt

    def _spin_rate(self) -> float:
        """Cycles per second of `torch.cuda._sleep` here: the device-side wait that keeps the GPU
        ahead of the host (its length is given in clock cycles)."""
        stream = self.current_stream()
        cycles = 1_000_000
        self.spin(cycles)
        self.sync()
        start, end = self.event(enable_timing=True), self.event(enable_timing=True)
        self.record(start, stream)
        self.spin(cycles)
        self.record(end, stream)
        self.sync()
        return cycles / max(self.elapsed_ms(start, end) * 1e-3, 1e-6)

    def hold(self, seconds: float) -> None:
        """Keep the calling stream busy for about `seconds`: what the host enqueues meanwhile waits in order."""
        self.spin(max(1, int(seconds * self.spin_hz)))

    def begin(self, ready: list[Any] | None = None) -> tuple[Any, Any, Any]:
        """On the calling stream: a device-side wait (`ahead_s`), the call's inputs made ready (`ready`:
        storages whose bits op_time inverted, inverted back), a cold L2 (the flush), and behind them the
        start event. The host enqueues the call while the GPU is still busy, so the events
        time the GPU's work, not the launch latency of an idle device; and work on a stream that does
        not wait for the calling
        stream, started during the wait, reads inputs that are not ready yet, as it would in a program."""
        stream = self.current_stream()
        self.hold(self.ahead_s)
        for storage in ready or ():
            flip_bits(storage)
        self.flush.zero_()
        start, end = self.event(enable_timing=True), self.event(enable_timing=True)
        self.record(start, stream)
        return start, end, stream

    def end(self, end: Any, stream: Any) -> float:
        """Record the end event, wait for it, then for every stream of the device; returns that last
        wait: how long work the call left on other streams kept running after the calling stream finished."""
        self.record(end, stream)
        self.event_sync(end)
        t_stream = _perf()
        self.sync()
        return (_perf() - t_stream) * 1e-9

    def call_s(self, gpu_s: float, drain_s: float) -> float:
        """A call's time: `gpu_s` between the events on the calling stream, plus what the call left
        running on other streams (beyond the cost of an empty wait). Host work that outlasts the head
        start leaves the GPU idle after the start event, so it is inside the events too."""
        left = drain_s - self.drain_overhead_s if drain_s > 2 * self.drain_overhead_s + 5e-6 else 0.0
        return gpu_s + left

    def measure_overhead(self, calls: int = 7) -> None:
        """What the wait for the whole device costs after an empty call made exactly the way a timed
        call is (the same head start, the flush, the events), so that the host wakes from the end
        event and waits in the same state as after a call (an idle device's cost is lower, and would
        charge honest calls: the trust model's GPU timing). Seven head starts per batch: at most 35 ms."""
        samples = []
        for _ in range(calls):
            _start, end, stream = self.begin()
            samples.append(self.end(end, stream))
        self.drain_overhead_s = sorted(samples)[calls // 2]

    def snapshot(self, value: Any) -> list[tuple[Any, Any]]:
        """Copies of the CUDA tensors in `value`, enqueued on the calling stream as soon as the call
        returned: what a caller reading the output in stream order would see."""
        torch = self.torch
        return [(t, t.clone()) for t in buffers(value) if _type(t) is torch.Tensor and t.is_cuda]

    def unordered(self, snaps: list[tuple[Any, Any]]) -> bool:
        """Whether an output changed after its stream-ordered copy was taken (call after sync): its
        writes were still running on a stream the caller's stream was never made to wait for."""
        torch = self.torch
        for out, copy in snaps:
            a, b = out.detach().contiguous().reshape(-1), copy.reshape(-1)
            if a.dtype.is_floating_point or a.dtype.is_complex:  # bit patterns: NaN equals NaN
                a, b = a.view(torch.uint8), b.view(torch.uint8)
            if not torch.equal(a, b):
                return True
        return False

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.nvml is not None:
            n, h = self.nvml, self.handle
            try:
                out.update(sm_clock_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                           mem_clock_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                           temperature_c=n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                           power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0)
            except Exception:
                pass
        return out

    def energy_j(self) -> float | None:
        if self.nvml is None:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0
        except Exception:
            return None


_cuda: Cuda | None = None


def _sync() -> None:
    if _cuda is not None:
        _cuda.sync()


def _nbytes(value: Any) -> int:
    total = 0
    for b in buffers(value):
        nb = getattr(b, "nbytes", None)
        total += int(nb) if nb is not None else 0
    return total


def _tamper() -> list[str]:
    out = []
    for (mod, attr), orig in _watched.items():
        m = sys.modules.get(mod)
        if m is not None and getattr(m, attr, None) is not orig:
            out.append(f"patched {mod}.{attr}")
    return out


def _call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    try:
        return fn(*args, **kwargs), None
    except BaseException as exc:  # SystemExit, KeyboardInterrupt included: the candidate's to own
        if _type(exc) is PermissionError and _violations:
            return None, {"type": "PermissionError", "message": str(exc), "tb": ""}
        tb = traceback.format_exc(limit=8)
        return None, {"type": f"{_type(exc).__module__}.{_type(exc).__qualname__}", "message": str(exc)[:500],
                      "tb": tb[-3000:]}


# Threads the candidate's own code starts, counted while they run: one still running when the
# call has returned is finishing the work outside it.
_candidate_threads = [0]
_thread_lock = _thread.allocate_lock()
_real_start_new_thread = _thread.start_new_thread


def _counting_start_new_thread(function: Any, args: Any = (), kwargs: Any = None) -> Any:
    if not (_hook_on and _candidate_frame(sys._getframe(1))):
        return _real_start_new_thread(function, args, kwargs or {})

    def run(*a: Any, **k: Any) -> Any:
        try:
            return function(*a, **k)
        finally:
            with _thread_lock:
                _candidate_threads[0] -= 1

    with _thread_lock:
        _candidate_threads[0] += 1
    return _real_start_new_thread(run, args, kwargs or {})


_thread.start_new_thread = _counting_start_new_thread
if hasattr(threading, "_start_new_thread"):
    threading._start_new_thread = _counting_start_new_thread


def op_check(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    results = []
    for seed in req["seeds"]:
        runs = []
        for rep in range(req.get("repeat", 1)):
            args, kwargs, fn = subject.inputs(seed)
            if _cuda is not None:
                _cuda.sync()
                if rep % 2:  # the second call behind a device-side wait: side streams that join it start late
                    _cuda.hold(200e-6)
            out, err = _call(fn, args, kwargs)
            snaps = _cuda.snapshot(out) if _cuda is not None and err is None else []
            _sync()
            left = _candidate_threads[0]  # right at return, before anything else
            entry: dict[str, Any] = {"error": err}
            if snaps and _cuda is not None:
                entry["unordered"] = _cuda.unordered(snaps)
                del snaps
            if err is None:
                entry["output"] = encode(out)
                entry["aliases_input"] = aliases(out, (*args, *kwargs.values()))
            entry["inputs_after"] = encode([list(args), kwargs], digest=True) if req.get("inputs_after", True) \
                else None
            entry["threads_left"] = left
            runs.append(entry)
        result: dict[str, Any] = {"seed": seed, "runs": runs}
        if req.get("oracle") and runs[0]["error"] is None and _has_half(out):
            result["oracle"] = _oracle(subject, seed)
        results.append(result)
    return {"results": results}


def op_oracle(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """The float32 results (see _oracle) for the given seeds, and nothing else: asked for after a timed
    round whose half-precision outputs missed the candidate's."""
    return {"oracles": [_oracle(subject, seed) for seed in req["seeds"]]}


def op_reproduce(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """The reference on each captured call, with what the capture recorded next to what it does now."""
    calls = []
    for index in req["seeds"]:
        recorded = subject.recorded(index)["outcome"]
        args, kwargs, fn = subject.inputs(index)
        out, err = _call(fn, args, kwargs)
        entry: dict[str, Any] = {"index": index, "error": err, "raises": recorded.get("type")}
        if recorded["kind"] == "return":
            if recorded.get("value") is not None:
                entry["recorded"] = encode(_Unpickler(subject).loads(recorded["value"]))
            else:
                entry["recorded_type"] = recorded.get("unpicklable", "")
            if err is None:
                entry["actual"] = encode(out)
                entry["actual_type"] = f"{_type(out).__module__}.{_type(out).__qualname__}"
        calls.append(entry)
    return {"reproduced": calls}


_HALF = ("torch.bfloat16", "torch.float16")


def _has_half(value: Any) -> bool:
    return any(str(getattr(b, "dtype", "")) in _HALF for b in buffers(value))


def _upcast(value: Any) -> Any:
    """The same value with its bf16/fp16 tensors (and a module's parameters) in float32."""
    torch = sys.modules["torch"]
    t = _type(value)
    if t in (list, tuple):
        return t(_upcast(v) for v in value)
    if t is dict:
        return {k: _upcast(v) for k, v in value.items()}
    if t is torch.Tensor and str(value.dtype) in _HALF:
        return value.float()
    if _isinstance(value, torch.nn.Module):
        return value.float()
    return value


def _oracle(subject: Subject, seed: int) -> Any:
    """The reference's output on the same input computed in float32: how far eager's own half-precision
    rounding of intermediates lies from the exact result (the harness accepts a candidate at least that
    close to it). None when the reference does not run in float32."""
    if "torch" not in sys.modules:
        return None
    args, kwargs, fn = subject.inputs(seed)
    owner = getattr(fn, "__self__", None)
    if owner is not None and _isinstance(owner, sys.modules["torch"].nn.Module):
        owner.float()
    elif _isinstance(fn, sys.modules["torch"].nn.Module):
        fn.float()
    out, err = _call(fn, tuple(_upcast(list(args))), _upcast(kwargs))
    _sync()
    if err is not None:
        return None
    try:
        return encode(out)
    except Exception:
        return None


def op_profile(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """Calls on fresh inputs inside an NVTX range `redline_call`, for Nsight Compute to profile
    (only the kernels launched inside the range: not the inputs' creation, not the harness's)."""
    nvtx = _cuda.torch.cuda.nvtx if _cuda is not None else None
    for seed in req["seeds"]:
        args, kwargs, fn = subject.inputs(seed)
        _sync()
        if nvtx is not None:
            nvtx.range_push("redline_call")
        _out, err = _call(fn, args, kwargs)
        _sync()
        if nvtx is not None:
            nvtx.range_pop()
        if err is not None:
            return {"batch_error": f"{err['type']}: {err['message']}"}
    return {}


def op_energy(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """NVML's energy counter over back-to-back calls on the prepared inputs for at least `min_s`
    (the counter moves in steps of milliseconds: a window of a few calls reads mostly noise). No L2
    flush, no output checks inside the window: joules of the calls themselves."""
    cuda = _cuda
    prepared = [subject.inputs(s) for s in req["seeds"]]
    if cuda is None or cuda.energy_j() is None or not prepared:
        return {"energy_j": None, "calls": 0}
    for args, kwargs, fn in prepared:
        fn(*args, **kwargs)
    cuda.sync()
    calls, deadline = 0, _perf() + int(req.get("min_s", 0.3) * 1e9)
    energy0 = cuda.energy_j()
    while calls < 3 or _perf() < deadline:
        args, kwargs, fn = prepared[calls % len(prepared)]
        fn(*args, **kwargs)
        calls += 1
        if calls % len(prepared) == 0:
            cuda.sync()  # bounded queue: the window ends when the work does
    cuda.sync()
    energy1 = cuda.energy_j()
    return {"energy_j": energy1 - energy0 if energy0 is not None and energy1 is not None else None, "calls": calls,
            "tamper": _tamper()}


def op_time(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    seeds = req["seeds"]
    keep = set(req.get("keep", []))
    prepared = [subject.inputs(s) for s in seeds]
    _sync()
    cuda = _cuda
    # On CUDA each call's inputs are kept with their bits inverted until the calling stream reaches
    # that call (see Cuda.begin): a storage shared by several calls is restored at its first.
    ready: list[list[Any]] = []
    seen: set[int] = set()
    for args, kwargs, _fn in prepared:
        mine = []
        if cuda is not None:
            for st in tensor_storages([*args, *kwargs.values()]):
                if st.device.type == "cuda" and st.data_ptr() not in seen and flip_bits(st):
                    mine.append(st)
                seen.add(st.data_ptr())
        ready.append(mine)
    times: list[float] = []
    parts: list[tuple[float, float, float]] = []  # CUDA: (GPU time on the calling stream, issue time, final wait)
    kept: dict[str, Any] = {}
    errors: str | None = None
    reused = False
    threads_left = 0
    prev_out: Any = None
    if cuda is not None:
        # The head start is the harness's to choose, the same for both sides (from the reference's own
        # time to issue a call): host work a call needs beyond it is charged as idle GPU time.
        cuda.ahead_s = float(req.get("ahead_s", cuda.ahead_s))
        cuda.measure_overhead()
    energy0 = cuda.energy_j() if cuda else None
    start = _perf()
    for i, (args, kwargs, fn) in enumerate(prepared):
        events = cuda.begin(ready[i]) if cuda is not None else None  # a cold L2 for every timed call
        t0 = _perf()
        try:
            out = fn(*args, **kwargs)
            t1 = _perf()
            drain_s = cuda.end(events[1], events[2]) if cuda is not None and events is not None else 0.0
        except BaseException:
            errors = traceback.format_exc(limit=6)[-2000:]
            break
        threads_left = max(threads_left, _candidate_threads[0])
        host_s = (t1 - t0) * 1e-9
        if cuda is not None and events is not None:
            gpu_s = cuda.elapsed_ms(events[0], events[1]) * 1e-3
            times.append(cuda.call_s(gpu_s, drain_s))
            parts.append((gpu_s, host_s, drain_s))
        else:
            times.append(host_s)
        if prev_out is not None and any(shares(a, b) for a in buffers(out) for b in buffers(prev_out)):
            reused = True
        if i in keep:
            kept[str(i)] = encode(out)  # encoded at once: work finishing later is not seen
        prev_out = out
    total = (_perf() - start) * 1e-9
    first = [*prepared[0][0], *prepared[0][1].values()] if prepared else []
    extra: dict[str, Any] = {"bytes_moved": _nbytes(first) + (_nbytes(prev_out) if prev_out is not None else 0)
                             if prepared else 0}
    if cuda is not None:
        energy1 = cuda.energy_j()
        mid = [sorted(col)[len(col) // 2] for col in zip(*parts, strict=True)] if parts else []
        extra.update(gpu={**cuda.state(), **({"gpu_time_s": mid[0], "issue_s": mid[1], "drain_s": mid[2]} if mid else {})},
                     energy_j=(energy1 - energy0) if energy0 is not None and energy1 is not None else None)
    return {"times": times, "batch_s": total, "outputs": kept, "batch_error": errors, "reused_buffer": reused,
            "threads_left": threads_left, "tamper": _tamper(), **extra}


def main() -> None:
    global _scratch, _writable, _allow_processes
    spec = json.loads(sys.stdin.readline())
    out = os.fdopen(spec["reply_fd"], "w", buffering=1)
    _scratch = os.path.abspath(spec["scratch"])
    _writable = (_scratch, *([os.path.abspath(spec["compile_cache"])] if spec.get("compile_cache") else []))
    _allow_processes = bool(spec.get("allow_processes"))
    for key, value in spec.get("env", {}).items():
        os.environ.setdefault(key, value)  # before any user code imports what reads it
    sys.addaudithook(_audit)
    os.chdir(_scratch)

    def reply(obj: dict[str, Any]) -> None:
        obj["violations"] = list(_violations)
        out.write(_json_dumps(obj) + "\n")

    try:
        subject = Subject(spec)
    except BaseException as exc:
        reply({"op": "load", "ok": False, "error": {"type": f"{_type(exc).__qualname__}", "message": str(exc)[:500],
                                                    "tb": traceback.format_exc(limit=8)[-3000:]}})
        return
    info: dict[str, Any] = {}
    if spec.get("describe"):  # the trusted probe: what the prompt says about inputs and hardware
        try:
            args, kwargs, _ = subject.inputs(subject.first_key())
            info = {"inputs": [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]}
        except Exception as exc:
            info = {"inputs": [f"make_inputs failed: {_type(exc).__name__}: {str(exc)[:200]}"]}
        info["hardware"] = hardware()
    reply({"op": "load", "ok": True, "tamper": _tamper(), **info,
           **({"gpu": {**_cuda.state(), "copy_bandwidth_Bps": _cuda.bandwidth}} if _cuda is not None else {})})
    for line in sys.stdin:
        t_req = _perf()
        req = json.loads(line)
        _sample_seed[0] = int(req.get("sample_seed", 0))
        try:
            result = {"check": op_check, "time": op_time, "profile": op_profile, "oracle": op_oracle,
                      "energy": op_energy, "reproduce": op_reproduce}[req["op"]](
                subject, req)
            result["ok"] = True
        except BaseException as exc:
            result = {"ok": False, "error": {"type": _type(exc).__qualname__, "message": str(exc)[:500],
                                             "tb": traceback.format_exc(limit=8)[-3000:]}}
        result["op"] = req["op"]
        result["worker_s"] = (_perf() - t_req) * 1e-9
        result["tamper"] = sorted(set(result.get("tamper", [])) | set(_tamper()))
        reply(result)


if __name__ == "__main__":
    main()
