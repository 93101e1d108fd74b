"""The run's environment: GPU name, driver, CUDA, cuDNN, NCCL and torch versions.

They go into the file's header comment and into every sample's attributes (library versions change kernel times a
lot, so perfcast keeps them as features). ``collect`` needs torch and imports it when called; the parsers do not.
"""

from __future__ import annotations

import platform
import re
import subprocess
from typing import Dict, Mapping, Optional

from . import __version__

#: Environment keys copied into every sample's attributes.
SAMPLE_KEYS = ("torch", "cuda", "cudnn", "driver", "collector")

_DRIVER_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def driver_from_proc(text: str) -> Optional[str]:
    """The driver version in the text of ``/proc/driver/nvidia/version`` (proprietary or open kernel module)."""
    m = _DRIVER_RE.search(text)
    return m.group(1) if m else None


def driver_version() -> str:
    """The NVIDIA driver version: from ``nvidia-smi``, else ``/proc/driver/nvidia/version``, else ``unknown``."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        if out:
            return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            return driver_from_proc(f.read()) or "unknown"
    except OSError:
        return "unknown"


def collect(device: str = "cuda") -> Dict[str, object]:
    """The environment of ``device`` (``cuda``, ``cuda:N`` or ``cpu``). Needs torch."""
    import torch

    info: Dict[str, object] = {
        "collector": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "python": platform.python_version(),
    }
    hip = getattr(torch.version, "hip", None)
    if hip:
        info["hip"] = hip
    dev = torch.device(device)
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info["gpu"] = torch.cuda.get_device_name(idx)
        info["gpu_cc"] = f"{props.major}.{props.minor}"
        info["gpu_sms"] = props.multi_processor_count
        info["gpu_mem_gib"] = round(props.total_memory / 2**30, 1)
        info["driver"] = driver_version()
        cudnn = torch.backends.cudnn.version()
        info["cudnn"] = str(cudnn) if cudnn else "none"
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # NCCL is absent from some builds (ROCm uses RCCL, CPU wheels none)
            pass
    else:
        info["gpu"] = f"cpu ({platform.processor() or platform.machine()})"
        info["driver"] = "none"
        info["cudnn"] = "none"
    return info


def sample_attributes(info: Mapping[str, object], extra: Optional[Mapping[str, object]] = None) -> Dict[str, object]:
    """The attributes every sample of a run carries: the library versions in ``info`` (``SAMPLE_KEYS``)."""
    out = {k: info[k] for k in SAMPLE_KEYS if k in info}
    if extra:
        out.update(extra)
    return out
