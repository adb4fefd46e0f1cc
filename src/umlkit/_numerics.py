"""Pinned CPU numerics for the quick profile's records (issue 74, item 5): one record retrains to the same numbers on
an AVX2-only CPU and on an AVX-512 one.

A process that trains quick-profile records (``umlkit records train``, the workers ``umlkit reproduce`` starts,
``umlkit records verify --sample``) calls :func:`pin_for_records` before torch is imported. It sets

* ``ATEN_CPU_CAPABILITY=avx2``: torch's vectorised CPU kernels take their AVX2 variants on every CPU that has them;
* ``MKL_CBWR=AVX2``: MKL's conditional numerical reproducibility, the AVX2 code path of its BLAS;
* ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN's kernels (convolutions, some GEMMs) at most AVX2;

and, once torch is loaded, ``torch.use_deterministic_algorithms(True, warn_only=True)``. A value the user set
already is kept. ``UMLKIT_NUMERICS=native`` opts out (the host's own kernels).

Measured (``benchmarks/cross_cpu_records.py``, results in ``benchmarks/results/cross_cpu_zen*.json``): four records
of four runners retrained on an AMD EPYC Zen 3 (AVX2 only) and a Zen 4 (AVX-512, bf16) came back identical in every
field across the two CPUs when pinned, where natively one of the four (an ooDML R-Margin run) differed in 24 of 49
fields; the pin cost +10 % of training time on the Zen 3 and +15 % on the Zen 4.

The environment reaches torch, MKL and oneDNN only if it is set before they load, hence a root helper with no
import of torch. :func:`mode` says which numerics the running process has (each record keeps it beside its torch
version). Why by hand: the three switches are the libraries' own; what is ours is when to set them.
"""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["PIN", "OPT_OUT", "pin_for_records", "mode", "cpu_has_avx2"]

PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
OPT_OUT = "UMLKIT_NUMERICS"   # "pinned" (default) or "native"
PINNED, NATIVE = "pinned to AVX2", "native"


def cpu_has_avx2() -> bool | None:
    """Whether this x86 CPU reports AVX2 and FMA (None where /proc/cpuinfo cannot be read: not Linux, not x86)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        return None
    return None


def _wanted(env) -> bool:
    return env.get(OPT_OUT, "pinned").strip().lower() != "native" and bool(cpu_has_avx2())


def pin_for_records(env=None) -> str:
    """Pin this process's numerics for training quick-profile records (see the module docstring) and return
    :func:`mode`. Where torch is loaded already the environment cannot reach it any more: a warning says so and the
    process trains with its native kernels."""
    env = os.environ if env is None else env
    if not _wanted(env):
        return mode(env)
    if "torch" in sys.modules and env is os.environ and not _pinned_torch():
        warnings.warn("torch was imported before umlkit could pin its CPU numerics (ATEN_CPU_CAPABILITY, MKL_CBWR, "
                      "ONEDNN_MAX_CPU_ISA): these records train with this CPU's native kernels, and may differ in "
                      "the last digits from the same records trained on another kind of CPU", UserWarning,
                      stacklevel=2)
        return mode(env)
    for name, value in PIN.items():
        env.setdefault(name, value)
    if env is os.environ:
        import torch
        torch.use_deterministic_algorithms(True, warn_only=True)
    return mode(env)


def _pinned_torch() -> bool:
    import torch
    return torch.backends.cpu.get_cpu_capability() == "AVX2" and os.environ.get("MKL_CBWR") == PIN["MKL_CBWR"]


def mode(env=None) -> str:
    """:data:`PINNED` when the three switches hold their pinned values (and, once torch is loaded, torch runs its
    AVX2 kernels), else :data:`NATIVE`."""
    env = os.environ if env is None else env
    if any(env.get(name, "").lower() != value.lower() for name, value in PIN.items()):
        return NATIVE
    if env is os.environ and "torch" in sys.modules:
        return PINNED if _pinned_torch() else NATIVE
    return PINNED
