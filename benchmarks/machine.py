"""The machine a benchmark ran on, printed first: the same code runs at different speeds on
different x86-64 CPUs (AVX2 only on some, AVX-512 VNNI on others), so a figure without its CPU
cannot be compared."""

from __future__ import annotations

import os
import platform
from pathlib import Path

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu() -> dict[str, object]:
    """CPU model, usable cores and which of :data:`FLAGS` the CPU has (Linux /proc/cpuinfo)."""
    model, flags = platform.processor() or platform.machine(), set()
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    return {"model": model, "cores": len(os.sched_getaffinity(0)),
            "flags": [f for f in FLAGS if f in flags]}


def describe() -> str:
    c = cpu()
    return f"machine: {c['model']}, {c['cores']} cores, flags {' '.join(c['flags']) or 'none'}"


if __name__ == "__main__":
    print(describe())
