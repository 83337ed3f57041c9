"""Is a weights file whole? Read on the driver before any Spark work, so a file cut short by a
copy or a download stops the run at once instead of in every executor that loads it.

Only headers and sizes are read: a safetensors file's JSON header names the byte range of
every tensor, so the file must end exactly where the last one does; a ``torch.save`` zip keeps
its directory at the end, which a truncated copy has lost."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit


def weights_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole weights file, or None when it looks whole."""
    if path.suffix == ".safetensors":
        return _safetensors_problem(path)
    return _torch_problem(path)


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or n > min(MAX_HEADER, size - 8):
            return (f"truncated or not a safetensors file ({size:,} bytes, header length "
                    f"{n:,})")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return f"corrupt safetensors header ({size:,} bytes)"
    if not isinstance(header, dict):
        return "corrupt safetensors header (not a JSON object)"
    offsets = [t.get("data_offsets", [0, 0]) for k, t in header.items()
               if k != "__metadata__" and isinstance(t, dict)]
    if not all(isinstance(o, list) and len(o) == 2 for o in offsets):
        return "corrupt safetensors header (tensor offsets are not [start, end] pairs)"
    ends = [o[1] for o in offsets]
    if not all(isinstance(e, int) for e in ends):
        return "corrupt safetensors header (tensor offsets are not integers)"
    need = 8 + n + max(ends, default=0)
    if size < need:
        return f"truncated: {size:,} bytes where its header describes {need:,}"
    if size > need:
        return f"corrupt: {size:,} bytes where its header describes {need:,}"
    return None


def _torch_problem(path: Path) -> str | None:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        return None  # the legacy pickle format: no index to check against
    try:
        with zipfile.ZipFile(path) as z:
            size = path.stat().st_size
            if any(i.header_offset + i.compress_size > size for i in z.infolist()):
                return f"truncated: {size:,} bytes, shorter than its zip index says"
    except zipfile.BadZipFile as exc:
        return f"truncated or corrupt torch.save zip ({exc})"
    return None
