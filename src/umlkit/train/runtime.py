"""What the machine gives a run: device, precision and loader workers, resolved from ``auto`` and checked before
any data is read, and the batch size checked against the training set before a model is built.

The papers trained on GPUs in 16-bit mixed precision (PUMA: fp16 autocast; VPTSP: bf16) with several loader
workers; the same configuration on a CPU, a GPU without bf16 or a two-core machine should run (``auto``) or stop
at once with the fix, never after the data loaded or an epoch in. ``auto`` resolves as: device - the first GPU
when torch sees one, else the CPU; precision - bf16 on a GPU that supports it, fp16 on an older GPU, fp32 on the
CPU (bf16 autocast on a CPU without native bf16 matrix units is slower than fp32, so an explicit bf16 takes fp32
there, with a warning); loader workers - one per core
but one, at most 8.

Why by hand: these are a few checks of torch's device queries; no library owns them.
"""
from __future__ import annotations

import os

import torch

__all__ = ["resolve_device", "resolve_precision", "resolve_workers", "check_batch", "AMP_DTYPES"]

AMP_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
MAX_AUTO_WORKERS = 8


def resolve_device(name: str) -> torch.device:
    """``auto``: the GPU when torch sees one, else the CPU; a GPU that is not there is an error naming the key."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"config key device = {name!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s) here; use "
                         f"device: auto (a GPU when there is one) or cpu (--set device=auto)")
    return device


def resolve_precision(name: str, device: torch.device) -> str:
    """``auto`` -> bf16 / fp16 / fp32 for ``device`` (see the module docstring); fp16 on the CPU is an error; bf16
    on a CPU without native bf16 (the kernel rule of :mod:`umlkit.metrics.kernels`: no avx512_bf16/amx_bf16, or
    oneDNN limited below them) runs fp32 and says so: oneDNN emulates bf16 there at about 0.1x fp32."""
    if name == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if name == "bf16" and device.type == "cpu":
        from umlkit.metrics.kernels import cpu_flags, native
        if not native("bf16", cpu_flags()):
            import warnings
            warnings.warn("config key precision = 'bf16': this CPU has no native bf16 (no avx512_bf16/amx_bf16, or "
                          "ONEDNN_MAX_CPU_ISA below them), where bf16 autocast is emulated at about 0.1x fp32; "
                          "training in fp32 instead", stacklevel=2)
            return "fp32"
    if name == "fp16" and device.type != "cuda":
        raise ValueError(f"config key precision = 'fp16' needs a GPU and this run is on {device}; use precision: auto "
                         f"(fp32 on the CPU) or bf16 (--set precision=auto)")
    return name


def resolve_workers(value, cores: int | None = None) -> int:
    """``auto`` -> one loader worker per core but one (at most :data:`MAX_AUTO_WORKERS`); a number above the
    machine's cores is an error with the fix."""
    cores = cores or os.cpu_count() or 1
    if value == "auto":
        return max(0, min(MAX_AUTO_WORKERS, cores - 1))
    if int(value) > cores:
        raise ValueError(f"config key data.num_workers = {value}: this machine has {cores} CPU core(s); use "
                         f"data.num_workers: auto ({max(0, min(MAX_AUTO_WORKERS, cores - 1))} here) or at most {cores} "
                         f"(--set data.num_workers=auto)")
    return int(value)


def check_batch(batch_size: int, train_set, samples_per_class: int, sampler: str) -> None:
    """A batch larger than the training set, or needing more classes than it has (a class sampler's batch holds
    batch_size / samples_per_class classes), is an error naming the sizes and the fix, before a model is built
    (the samplers check the same later, without the fix)."""
    n = len(train_set)
    where = ", ".join(getattr(train_set, "source_names", []) or []) or "the training set"
    classes = int(getattr(train_set, "num_classes", 0) or 0)
    per_class = sampler in ("m_per_class", "class_random", "unique_class") and classes
    fit = min(n, classes * samples_per_class) if per_class else n   # the largest batch both limits allow
    if batch_size > n:
        raise ValueError(f"config key data.batch_size = {batch_size}: {where} has only {n} training images"
                         + (f" in {classes} classes, and the {sampler} sampler takes {samples_per_class} per class"
                            if per_class and fit < n else "")
                         + f"; set data.batch_size to at most {fit} (--set data.batch_size={max(1, fit)})")
    if per_class and batch_size // samples_per_class > classes:
        raise ValueError(f"config key data.batch_size = {batch_size}: the {sampler} sampler fills a batch with "
                         f"{batch_size // samples_per_class} classes of {samples_per_class} images, and {where} has "
                         f"{classes} training classes; set data.batch_size to at most {fit} "
                         f"(--set data.batch_size={fit})")
