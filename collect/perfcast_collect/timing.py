"""S1's timing rule and the timers that apply it.

S1 times every operator with 10 warm-up iterations, then 10 timed ones, and keeps the **mean of the middle 5 of
the 10 sorted samples** (robust to a cold first launch and to a stray slow one). With 10 samples and 5 kept the
middle is not symmetric: we drop the 2 fastest and the 3 slowest (0-based sorted indices 2…6), i.e. the window
starts at ``(n − keep) // 2``.

On a GPU each timed iteration is bracketed by two CUDA events. Before the timed iterations are enqueued the GPU is
held busy by a spin kernel (``torch.cuda._sleep``) long enough for the CPU to enqueue all of them, so each pair of
events measures the GPU's time for the iteration — the span from its first kernel's start to its last kernel's
end, the quantity S1 reads from the profiler's kernel spans — and not Python's launch overhead.

Only ``CudaTimer`` needs torch, and imports it when built; the statistic and the loop are plain Python.
"""

from __future__ import annotations

import time
from typing import Callable, List, Sequence

WARMUP = 10
ITERS = 10
KEEP = 5


def middle_mean(samples: Sequence[float], keep: int = KEEP) -> float:
    """Mean of the middle ``keep`` values of ``samples`` after sorting (all of them when there are fewer).

    ``ValueError`` on no samples. For 10 samples: mean of sorted[2:7].
    """
    if not samples:
        raise ValueError("no samples to average")
    s = sorted(samples)
    k = min(keep, len(s))
    start = (len(s) - k) // 2
    window = s[start : start + k]
    return sum(window) / k


class Measurement:
    """The timed samples of one operator (µs) and S1's statistic over them."""

    def __init__(self, samples_us: Sequence[float], keep: int = KEEP):
        self.samples_us = list(samples_us)
        self.time_us = middle_mean(self.samples_us, keep)
        self.min_us = min(self.samples_us)
        self.max_us = max(self.samples_us)


class WallTimer:
    """Host wall-clock timer (``time.perf_counter``): for CPU smoke runs and tests, where there are no events.
    ``sync`` is called after each iteration (a no-op here; a device timer waits for the device)."""

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync

    def time_iterations(self, fn: Callable[[], object], iters: int) -> List[float]:
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append((time.perf_counter() - t0) * 1e6)
        return out


def sleep_cycles(launch_us: float, iters: int, cycles_per_us: float, cap_us: float = 200_000.0) -> int:
    """Spin-kernel length, in GPU clock cycles, that keeps the GPU busy while the CPU enqueues ``iters``
    iterations each costing ``launch_us`` of host time: twice the enqueue time plus 50 µs, at most ``cap_us``."""
    us = min(cap_us, 2.0 * max(0.0, launch_us) * iters + 50.0)
    return max(1, int(us * cycles_per_us))


class CudaTimer:
    """CUDA-event timer for one device (see the module doc for the spin kernel that hides launch overhead)."""

    def __init__(self, device):
        import torch  # lazily: only GPU runs need it

        self.torch = torch
        self.device = device
        self.cycles_per_us = self._calibrate()

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def _calibrate(self) -> float:
        torch = self.torch
        with torch.cuda.device(self.device):
            cycles = 2_000_000
            torch.cuda._sleep(1000)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            torch.cuda.synchronize()
            us = a.elapsed_time(b) * 1e3
        return cycles / us if us > 0 else 1500.0

    def time_iterations(self, fn: Callable[[], object], iters: int) -> List[float]:
        torch = self.torch
        with torch.cuda.device(self.device):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()  # one more untimed call: how long the host takes to enqueue an iteration
            launch_us = (time.perf_counter() - t0) * 1e6
            torch.cuda.synchronize()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
            torch.cuda._sleep(sleep_cycles(launch_us, iters, self.cycles_per_us))
            for s, e in zip(starts, ends):
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


def measure(fn: Callable[[], object], timer, warmup: int = WARMUP, iters: int = ITERS, keep: int = KEEP) -> Measurement:
    """S1's rule: ``warmup`` untimed calls, then ``iters`` timed ones through ``timer``; the mean of the middle
    ``keep`` sorted samples."""
    for _ in range(warmup):
        fn()
    timer.sync()
    return Measurement(timer.time_iterations(fn, iters), keep)
