"""What device a trace was recorded on, read from its own `deviceProperties` (Kineto writes
them at the top level, one dict per device) and never guessed.

Kineto writes the same keys for CUDA and ROCm: an AMD MI250 reports computeMajor 9 and
computeMinor 0 like an H100, so "sm_90" is only said of a device the properties show to be
NVIDIA's (its name, or the CUDA-only keys). ROCm's properties carry
`maxSharedMemoryPerMultiProcessor` instead, and a warp of 64. A trace with no properties (an
MTIA's, a CPU run's) has an unknown device, said as such.
"""

from __future__ import annotations

from typing import Any

UNKNOWN = "unknown (the trace records no device properties)"
_NVIDIA_NAMES = ("NVIDIA", "Tesla", "Quadro", "GeForce", "TITAN")
_NVIDIA_KEYS = ("sharedMemPerBlockOptin", "regsPerMultiprocessor", "sharedMemPerMultiprocessor")
_AMD_NAMES = ("AMD", "Radeon", "Instinct")


def vendor(props: dict[str, Any]) -> str | None:
    """'NVIDIA', 'AMD', or None when the properties do not say."""
    name = str(props.get("name", ""))
    if any(word in name for word in _AMD_NAMES) or "maxSharedMemoryPerMultiProcessor" in props:
        return "AMD"
    if name.startswith(_NVIDIA_NAMES) or any(key in props for key in _NVIDIA_KEYS):
        return "NVIDIA"
    return None


def describe(props: dict[str, Any]) -> str:
    """'NVIDIA A100-SXM4-40GB (sm_80, 108 SMs, 39 GiB)'; an AMD GPU's compute version and
    CUs; a vendor the properties do not show: its compute version, no architecture name."""
    major, minor = props.get("computeMajor", "?"), props.get("computeMinor", "?")
    units = props.get("numSms", "?")
    kind = vendor(props)
    if kind == "NVIDIA":
        parts = [f"sm_{major}{minor}", f"{units} SMs"]
    elif kind == "AMD":
        parts = [f"HIP compute {major}.{minor}", f"{units} CUs"]
    else:
        parts = [f"compute {major}.{minor}", f"{units} multiprocessors"]
    mem = props.get("totalGlobalMem")
    if isinstance(mem, int | float) and not isinstance(mem, bool):
        parts.append(f"{mem / 1024**3:.0f} GiB")
    return f"{props.get('name') or 'unnamed device'} ({', '.join(parts)})"


def device_name(properties: list[dict[str, Any]]) -> str | None:
    """The devices' names as one text (distinct names, in order); None when none is recorded."""
    names = [str(p["name"]) for p in properties if p.get("name")]
    return " + ".join(dict.fromkeys(names)) or None


def device_line(
    a: list[dict[str, Any]], b: list[dict[str, Any]], labels: tuple[str, str]
) -> str | None:
    """The Diff's first line when the two traces ran on different devices, or one of them on
    an unknown one; None when both record the same device, or neither records any (two CPU
    runs: nothing to tell apart)."""
    name_a, name_b = device_name(a), device_name(b)
    if name_a == name_b:
        return None
    where = f"{labels[0]} ran on {name_a or 'unknown'}, {labels[1]} on {name_b or 'unknown'}"
    if name_a is None or name_b is None:
        return f"Devices may differ: {where} (no device properties in that trace)."
    return f"Different devices: {where}; times differ by the hardware as well as by what ran."
