"""The ONNX Runtime engine: the local model folder exported once to ONNX (for sentence
embeddings with pooling and normalisation inside the graph; for a classifier, its logits),
optionally int8-quantised, cached on disk and run by onnxruntime on the CPU or, where a GPU is
assigned, its CUDA provider.

Exports are keyed by a fingerprint of the model's config and weights and written atomically
(temporary file + rename), so two executors exporting at once never read a half-written file.
Each export's sha256 is recorded beside it (``model.onnx.sha256``); a cached export that does
not match its hash (or, exported before hashes were recorded, does not load) is rebuilt. Each
export task has its own files in the export folder (:func:`export_name`), so the embedding and
the classifier exports of one folder never collide."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError, DeviceError
from sparkfield.nlp.device import cpu_flags
from sparkfield.nlp.encoder import BaseEncoder
from sparkfield.nlp.model import ModelError, fingerprint

QUANTIZE = ("none", "int8")
# what an export computes -> the transformers class it exports ("embedding": pooled, normalised)
EXPORTS = {
    "embedding": "AutoModel",
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
}
OPSET = 17
log = logging.getLogger("sparkfield.nlp")


class OnnxUnavailable(ConfigError):
    """onnxruntime (or onnx, for exporting) is not installed: exit 2 saying what to install."""


def require_onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:
        raise OnnxUnavailable("--engine onnx needs onnxruntime: pip install 'sparkfield[nlp]' "
                              "(or onnxruntime-gpu on GPU executors)") from exc
    return onnxruntime


def export_dir(folder: Path, onnx_dir: str | Path | None) -> Path:
    """``<model>/onnx/<fingerprint>`` (shipped with the model folder), or
    ``<onnx_dir>/<model name>-<fingerprint>``."""
    fp = fingerprint(folder)
    return Path(onnx_dir) / f"{folder.name}-{fp}" if onnx_dir else folder / "onnx" / fp


def export_name(task: str = "embedding", quantize: str = "none", signed: bool = False) -> str:
    """The export's file name in :func:`export_dir`: ``model.onnx`` / ``model_int8.onnx``
    for the embedding, ``<task>.onnx`` / ``<task>_int8.onnx`` for a classifier (``_int8_s8``:
    signed int8 weights, :func:`signed_int8`)."""
    stem = "model" if task == "embedding" else task
    if quantize == "none":
        return f"{stem}.onnx"
    return f"{stem}_{quantize}_s8.onnx" if signed else f"{stem}_{quantize}.onnx"


VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def signed_int8(cpuinfo: str | None = None) -> bool:
    """Whether this CPU multiplies int8 with VNNI (``/proc/cpuinfo`` flags :data:`VNNI_FLAGS`):
    there ONNX Runtime's u8 x s8 kernels do not saturate and run 2-3x faster than u8 x u8
    (``benchmarks/inference.py``), while on AVX2 without VNNI u8 x s8 can saturate.
    Classifier exports take signed weights where it does."""
    flags = cpu_flags(cpuinfo)
    return any(f in flags for f in VNNI_FLAGS)


def ensure_onnx(folder: Path, onnx_dir: str | Path | None = None, quantize: str = "none",
                on_rebuild: Callable[[str], None] | None = None,
                task: str = "embedding") -> Path:
    """The path of the ONNX file of ``task`` (:data:`EXPORTS`) for ``folder`` (exported, and
    quantised, when missing or when the cached file does not verify; ``on_rebuild`` is told
    of each rebuild)."""
    if quantize not in QUANTIZE:
        raise ConfigError(f"quantize must be one of {', '.join(QUANTIZE)}, got {quantize!r}")
    if task not in EXPORTS:
        raise ConfigError(f"ONNX export task must be one of {', '.join(EXPORTS)}, "
                          f"got {task!r}")
    target = export_dir(folder, onnx_dir)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the ONNX export folder {target}: {exc} (set onnx_dir "
                         "in conf/jobs/embed.yaml or --onnx-dir to a writable folder)") from exc
    fp32 = target / export_name(task)
    if task == "embedding":
        _ensure(fp32, lambda tmp: export_onnx(folder, tmp), on_rebuild)
    else:
        _ensure(fp32, lambda tmp: export_onnx(folder, tmp, task), on_rebuild)
    if quantize == "none":
        return fp32
    if task == "embedding":
        int8 = target / export_name(task, quantize)
        _ensure(int8, lambda tmp: quantize_int8(fp32, tmp), on_rebuild)
        return int8
    signed = signed_int8()
    int8 = target / export_name(task, quantize, signed)
    _ensure(int8, lambda tmp: quantize_int8(fp32, tmp, signed=signed, keep_float=False),
            on_rebuild)
    return int8


def _ensure(path: Path, write: Callable[[Path], None],
            on_rebuild: Callable[[str], None] | None) -> None:
    """Build ``path`` when missing or when it does not verify, recording its hash."""
    cached = path.is_file()
    if cached and _verifies(path):
        return

    def write_recorded(tmp: Path) -> None:
        write(tmp)
        _record_hash(tmp, path)

    _atomic(path, write_recorded)
    if cached:
        text = f"cached ONNX export {path} did not verify (cut short or corrupt): rebuilt"
        log.warning(text)
        if on_rebuild is not None:
            on_rebuild(text)


def hash_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _record_hash(written: Path, final: Path) -> None:
    """The hash of ``written`` (not yet renamed to ``final``) beside ``final``, atomically."""
    tmp = final.with_name(f".{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp.sha256")
    try:
        tmp.write_text(_sha256(written) + "\n")
        os.replace(tmp, hash_path(final))
    finally:
        tmp.unlink(missing_ok=True)


def _verifies(path: Path) -> bool:
    """``path`` matches its recorded hash; without one (an older export), or when the hash
    differs (another process may have renamed its own export into place between writing
    the hash and the file), it must load in onnxruntime, and then its hash is recorded."""
    recorded = hash_path(path)
    try:
        if recorded.is_file() and recorded.read_text().strip() == _sha256(path):
            return True
        ort = require_onnxruntime()
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:  # unreadable, unparsable: not a usable export
        return False
    with contextlib.suppress(OSError):  # a read-only cache: load-tested again next time
        _record_hash(path, path)
    return True


def _atomic(final: Path, write: Callable[[Path], None]) -> None:
    tmp = final.with_name(f".{final.stem}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp.onnx")
    try:
        write(tmp)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def export_onnx(folder: Path, path: Path, task: str = "embedding") -> None:
    """torch.onnx.export, dynamic batch and length, of model + mean pooling + L2
    normalisation (``embedding``), or of a classifier's logits (``sequence-classification``:
    [batch, labels]; ``token-classification``: [batch, tokens, labels]). Eager attention and
    a padded example batch, so the attention mask stays in the graph."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = getattr(transformers, EXPORTS[task]).from_pretrained(
        str(folder), local_files_only=True, attn_implementation="eager").eval()
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in tok.model_input_names]
    example = tok(["A short one.", "A somewhat longer example sentence, padded against."],
                  padding=True, return_tensors="pt")
    if task != "embedding":
        _export_logits(model, names, example, path, task == "token-classification")
        return

    class Pooled(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            inputs = dict(zip(names, args, strict=True))
            hidden = self.inner(**inputs).last_hidden_state
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"embedding": {0: "batch"}}
    with torch.inference_mode():
        torch.onnx.export(Pooled(model), tuple(example[n] for n in names), str(path),
                          input_names=names, output_names=["embedding"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)


def _export_logits(model, names: list[str], example, path: Path, per_token: bool) -> None:
    """A classifier's logits as the export's one output, ``logits``."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(**dict(zip(names, args, strict=True))).logits

    out = {0: "batch", 1: "tokens"} if per_token else {0: "batch"}
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"logits": out}
    with torch.inference_mode():
        torch.onnx.export(Logits(model), tuple(example[n] for n in names), str(path),
                          input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)


def quantize_int8(fp32: Path, path: Path, signed: bool = False, keep_float: bool = True) -> None:
    """Dynamic int8 quantisation of the weight MatMuls: unsigned 8-bit weights per output
    channel (u8 x u8 does not saturate on AVX2 CPUs without VNNI, as u8 x s8 can).

    Left in float: the feed-forward down-projections (weights wider in than out), whose inputs
    come out of GELU with the widest range: quantising them too gave min/mean cosine to fp32
    of 0.975/0.992 on 300 real sentences, against 0.984/0.995 without them (signed weights:
    0.986/0.994). Classifier exports (``keep_float`` False) quantise every weight MatMul, with
    signed weights where :func:`signed_int8` says so; their int8 accuracy check guards the
    labels."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise OnnxUnavailable("--quantize int8 needs onnx and onnxruntime: pip install "
                              "'sparkfield[nlp]'") from exc
    floats: list[str] = []
    if keep_float:
        graph = onnx.load(str(fp32)).graph
        shapes = {i.name: tuple(i.dims) for i in graph.initializer}
        floats = [n.name for n in graph.node if n.op_type == "MatMul" and any(
            len(shapes.get(i, ())) == 2 and shapes[i][0] > shapes[i][1] for i in n.input)]
        if not floats:
            raise ModelError(f"{fp32}: no feed-forward MatMuls found to keep in float")
    quantize_dynamic(str(fp32), str(path),
                     weight_type=QuantType.QInt8 if signed else QuantType.QUInt8,
                     per_channel=True, op_types_to_quantize=["MatMul"], nodes_to_exclude=floats)


def providers(device: str, available: list[str]) -> list:
    """onnxruntime providers for a device chosen by :func:`choose_device`."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in available:
        raise DeviceError(f"--engine onnx on {device}, but this onnxruntime has no CUDA "
                          f"provider (has: {', '.join(available)}): pip install "
                          "onnxruntime-gpu on the GPU executors, or pass --device cpu")
    index = int(device.partition(":")[2] or 0)
    return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]


def onnx_session(path: Path, device: str, threads: int | None):
    """An onnxruntime session of the export at ``path`` on ``device`` (:func:`providers`),
    ``threads`` intra-op threads (None: onnxruntime's choice), every graph optimisation."""
    ort = require_onnxruntime()
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        str(path), opts, providers=providers(device, ort.get_available_providers()))


@dataclass
class OnnxEncoder(BaseEncoder):
    folder: Path
    device: str = "cpu"
    max_tokens: int = 256
    threads: int | None = None
    quantize: str = "none"
    onnx_dir: str | None = None
    path: Path | None = None  # an export made beforehand (the driver's); None: ensure_onnx

    def __post_init__(self) -> None:
        require_onnxruntime()
        self._load_tokenizer()
        if self.path is None:
            self.path = ensure_onnx(self.folder, self.onnx_dir, self.quantize)
        self.session = onnx_session(self.path, self.device, self.threads)
        self.inputs = [i.name for i in self.session.get_inputs()]

    def forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """The export's output: pooled and normalised inside the graph."""
        return self.session.run(None, {k: batch[k] for k in self.inputs})[0]

    def pool(self, output: np.ndarray, batch: dict[str, np.ndarray]) -> np.ndarray:
        return output
