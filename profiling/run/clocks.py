"""The GPU's clocks, power, temperature and throttle reasons while the measured steps run,
sampled through NVML (nvidia-ml-py) on a thread of its own (issue 23).

Why: a kernel timed under sustained load can run 5–12% slower than in a click's burst
(docs/performance.md), most likely at a lower clock; a run that says which clocks it ran at,
and whether a throttle reason was active, can be read with that in mind. Torch-free: the runner
passes the GPU's PCI bus id, and a CPU machine (or one without NVML) gets the reason instead.
One sample is always taken at the start and one at the end, so even a run shorter than the
sampling period has readings from both sides of it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

PERIOD_S = 0.005  # NVML's clock and power readings update every few ms at best
MAX_SAMPLES = 2000  # 10 s of samples; the rest of a longer run is not sampled
CLOCK_DROP = 0.03  # the SM clock dipping more than this below the run's own top is a drop

# NVML's clocks-event (throttle) reasons: GPU idle and an application clock setting are the
# normal state; the others slow the GPU down for power, heat or a hardware signal.
REASONS: dict[int, str] = {
    0x1: "gpu idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
BENIGN = 0x1 | 0x2 | 0x100


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


@dataclass
class Sample:
    t_ms: float  # since the sampler started
    sm_mhz: int
    mem_mhz: int
    power_w: float | None
    temp_c: int | None
    reasons: int  # the bitmask of REASONS


@dataclass
class Clocks:
    """What the sampler read: the samples and their summary, or why there are none."""

    available: bool
    reason: str = ""  # why NVML gave nothing (a CPU run, no library, no permission)
    samples: list[Sample] = field(default_factory=list)
    max_sm_mhz: int | None = None  # the GPU's own maximum SM clock

    def summary(self) -> dict[str, Any]:
        """The figures the Summary stores: ranges, active reasons, and a warning."""
        if not self.available or not self.samples:
            return {"available": False, "reason": self.reason or "no samples"}
        sm = [s.sm_mhz for s in self.samples]
        power = [s.power_w for s in self.samples if s.power_w is not None]
        temps = [s.temp_c for s in self.samples if s.temp_c is not None]
        mask = 0
        for sample in self.samples:
            mask |= sample.reasons
        figures = {
            "available": True,
            "samples": len(self.samples),
            "sm_mhz_min": min(sm),
            "sm_mhz_max": max(sm),
            "sm_mhz_device_max": self.max_sm_mhz,
            "mem_mhz_min": min(s.mem_mhz for s in self.samples),
            "mem_mhz_max": max(s.mem_mhz for s in self.samples),
            "power_w_mean": sum(power) / len(power) if power else None,
            "power_w_max": max(power) if power else None,
            "temp_c_max": max(temps) if temps else None,
            "reasons": reason_names(mask),
            "throttled": reason_names(mask & ~BENIGN),
        }
        figures["warning"] = warning(figures)
        return figures

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary(), "series": [asdict(sample) for sample in self.samples]}


def warning(figures: dict[str, Any]) -> str | None:
    """A clock that dropped during the run, or a throttle reason that was active."""
    said = []
    low, high = figures["sm_mhz_min"], figures["sm_mhz_max"]
    if high and low < high * (1 - CLOCK_DROP):
        said.append(f"the SM clock dropped from {high} to {low} MHz during the run")
    if figures["throttled"]:
        said.append("throttle reason active: " + ", ".join(figures["throttled"]))
    return "; ".join(said) or None


def absent(reason: str) -> Clocks:
    return Clocks(available=False, reason=reason)


class Sampler:
    """`with Sampler(bus_id) as sampler:` samples until the block ends; `.clocks` then holds
    them. bus_id None (a CPU run) samples nothing and says so."""

    def __init__(self, bus_id: str | None, period_s: float = PERIOD_S) -> None:
        self.bus_id, self.period_s = bus_id, period_s
        self.clocks = absent("CPU run: no GPU to sample (NVML reads NVIDIA GPUs only)")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None

    def __enter__(self) -> Sampler:
        if self.bus_id is None:
            return self
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = _handle(pynvml, self.bus_id)
            top = pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM)
        except ImportError:
            self.clocks = absent("nvidia-ml-py is not installed: no NVML readings")
            return self
        except Exception as exc:  # NVMLError: no library, no device, no permission
            self.clocks = absent(f"NVML unavailable: {exc}")
            self._shutdown()
            return self
        self.clocks = Clocks(available=True, max_sm_mhz=int(top))
        self._began = time.perf_counter()
        self._read()
        self._thread = threading.Thread(target=self._loop, name="attnprof-nvml", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._read()
        self._shutdown()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s) and len(self.clocks.samples) < MAX_SAMPLES:
            self._read()

    def _read(self) -> None:
        nvml, handle = self._nvml, self._handle
        try:
            sample = Sample(
                t_ms=(time.perf_counter() - self._began) * 1e3,
                sm_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                mem_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                power_w=_optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
                temp_c=_optional(
                    lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
                ),
                reasons=int(_optional(lambda: _reasons(nvml, handle)) or 0),
            )
        except Exception as exc:  # a reading failed mid-run: keep what came before
            self.clocks.reason = f"NVML reading failed: {exc}"
            return
        self.clocks.samples.append(sample)

    def _shutdown(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):  # a library that failed to start
                self._nvml.nvmlShutdown()
            self._nvml = None


def _handle(nvml: Any, bus_id: str) -> Any:
    """The GPU by its PCI bus id; a machine with one GPU whose id NVML reads otherwise (a VM)
    falls back to that one GPU."""
    try:
        return nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
    except nvml.NVMLError:
        if nvml.nvmlDeviceGetCount() != 1:
            raise
        return nvml.nvmlDeviceGetHandleByIndex(0)


def _reasons(nvml: Any, handle: Any) -> int:
    """The current reasons, by the name NVML ≥ 12.535 uses, else the older one."""
    reader = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reader = reader or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return reader(handle)


def _optional(read: Any) -> Any:
    """A reading some GPUs (or a VM) refuse: None instead of failing the sample."""
    try:
        return read()
    except Exception:
        return None
