"""The harness's handles on CUDA and what the worker reports about the hardware: device-side timing
(a head start, a cold L2, events), held-back inputs, stream-order checks, NVML state and energy."""

from __future__ import annotations

import os
from typing import Any

from .memory import buffers, flip_bits
from .state import _perf, _type, state, watched


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
        watched[("torch.cuda", "synchronize")] = torch.cuda.synchronize
        watched[("torch.cuda", "Event")] = torch.cuda.Event
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




def sync() -> None:
    if state.cuda is not None:
        state.cuda.sync()


def hardware() -> str:
    """What this worker runs on: the GPU (name, SMs, memory, measured copy bandwidth) or the CPU."""
    if state.cuda is not None:
        props = state.cuda.torch.cuda.get_device_properties(0)
        return (f"{props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, "
                f"measured copy bandwidth {state.cuda.bandwidth / 1e12:.2f} TB/s")
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    import platform

    return f"{cpu or platform.machine()}, {os.cpu_count()} cores"


