"""Which device a task runs its model on: the GPU Spark assigned to the task, else CUDA device
0 when one is visible, else the CPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
