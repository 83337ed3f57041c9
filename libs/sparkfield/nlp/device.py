"""Which device a task runs its model on: the GPU Spark assigned to the task, else CUDA device
0 when one is visible, else the CPU; and what the CPU computes natively."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sparkfield.core.errors import DeviceError


def task_gpu_addresses() -> list[str]:
    """GPU addresses Spark gave the current task (empty outside a task or without GPUs)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return []
    res = ctx.resources().get("gpu")
    return list(res.addresses) if res is not None else []


def choose_device(requested: str, gpu_addresses: Sequence[str] | Mapping | None,
                  cuda_available: bool) -> str:
    """``requested``: auto | cpu | cuda | cuda:N. Returns a torch device string."""
    addrs = list(gpu_addresses or [])
    if requested == "cpu":
        return "cpu"
    if requested.startswith("cuda"):
        if not cuda_available:
            raise DeviceError(f"--device {requested} but torch sees no CUDA device "
                              "(CPU build of torch, or no GPU on this executor)")
        if requested == "cuda" and addrs:
            return f"cuda:{addrs[0]}"
        return "cuda:0" if requested == "cuda" else requested
    if requested != "auto":
        raise DeviceError(f"unknown device {requested!r} (auto, cpu, cuda, cuda:N)")
    if addrs and cuda_available:
        return f"cuda:{addrs[0]}"
    if cuda_available:
        return "cuda:0"
    return "cpu"


# CPUs that multiply bfloat16 in hardware: elsewhere torch emulates it, slower than float32
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The CPU's feature flags (``/proc/cpuinfo``'s first ``flags`` line; empty where there
    is none)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    return next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                 if line.startswith("flags")), [])


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (:data:`BF16_FLAGS`): there precision
    bf16 runs the model in bfloat16 on the CPU too (3.2x float32 per core on an Intel Xeon
    with AMX, ``benchmarks/inference.py``); elsewhere the CPU runs float32."""
    flags = cpu_flags(cpuinfo)
    return any(f in flags for f in BF16_FLAGS)
