"""The machine a benchmark ran on, printed with every result (a ratio measured on one CPU does not hold on another)."""
from __future__ import annotations

import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# the instruction sets the engine's kernels (bf16, int8) and oneDNN's GEMMs depend on, as /proc/cpuinfo names them
_ISA = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8")


def cpu_flags() -> list[str]:
    """The :data:`_ISA` flags this CPU reports (Linux; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in _ISA if flag in have]
    except OSError:
        pass
    return []


def blas() -> str:
    """The BLAS torch was built with, as its build configuration names it."""
    import re

    import torch
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def describe(device: str = "cpu") -> str:
    import torch
    text = (f"CPU: {cpu_model()} ({' '.join(cpu_flags()) or 'no AVX2'}); torch {torch.__version__} "
            f"(BLAS {blas()}, oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'}), "
            f"{torch.get_num_threads()} threads")
    if device.startswith("cuda") and torch.cuda.is_available():
        text += f"; GPU: {torch.cuda.get_device_name()}"
    return text


def rss_mb() -> float:
    """The process's resident memory now (Linux), in MB."""
    try:
        with open("/proc/self/statm") as f:
            import os
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")
