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


def describe(device: str = "cpu") -> str:
    import torch
    text = f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads"
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
