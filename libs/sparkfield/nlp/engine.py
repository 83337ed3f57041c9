"""What a Python worker builds to run a model (:class:`EngineSpec`: the folder, the engine,
the device, the task and its head) and the per-worker cache of what it built
(:func:`worker_encoder`): a model loads once per Python worker process and is reused by every
later task there."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from sparkfield.core.errors import ConfigError
from sparkfield.core.ship import shipped_dir
from sparkfield.nlp.device import choose_device, task_gpu_addresses
from sparkfield.nlp.model import check_model_dir

ENGINES = ("torch", "onnx")
# what a model computes -> the head class a worker builds for it ("module:Class"), constructed
# as Class(folder, device, max_tokens, threads=..., precision=..., **options): the engine
# imports a head only where its task runs
HEADS = {
    "sequence-classification": "sparkfield.nlp.heads:SequenceClassifier",
    "token-classification": "sparkfield.nlp.heads:TokenTagger",
    "zero-shot-classification": "sparkfield.nlp.heads:SequenceClassifier",
    "question-answering": "sparkfield.nlp.qa_head:SpanExtractor",
    "text2text-generation": "sparkfield.nlp.seq2seq:Seq2SeqGenerator",
}
TASKS = ("embedding", *HEADS)
# the heads the ONNX engine runs too: torch head -> (its ONNX twin, the export it runs)
ONNX_HEADS = {
    "sparkfield.nlp.heads:SequenceClassifier": ("sparkfield.nlp.onnx_heads:OnnxSequenceClassifier",
                                                "sequence-classification"),
    "sparkfield.nlp.heads:TokenTagger": ("sparkfield.nlp.onnx_heads:OnnxTokenTagger",
                                         "token-classification"),
}


@dataclass(frozen=True)
class EngineSpec:
    """Everything a worker needs to build its encoder; also the key of the per-worker cache."""

    folder: str | None  # None: the bundled model, where the encoder loads
    engine: str = "torch"
    device: str = "auto"
    max_tokens: int = 256
    half: bool = False
    threads: int | None = None
    quantize: str = "none"
    onnx_dir: str | None = None
    onnx_file: str | None = None  # the driver's export, made before the folders were shipped
    task: str = "embedding"  # what the model computes (:data:`TASKS`)
    precision: str = "fp32"  # fp32, fp16 or bf16 (bf16 on a CPU: where it is native)
    function: str = "auto"  # logits -> scores of a sequence classifier
    # the model's version (config and weights) when the driver checked the folder: a worker's
    # encoder is kept per spec, so a model changed in place is loaded again, never reused
    version: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.quantize != "none" and self.engine != "onnx":
            raise ConfigError("--quantize int8 needs --engine onnx")
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        if self.engine == "onnx" and self.task != "embedding" \
                and HEADS[self.task] not in ONNX_HEADS:
            raise ConfigError(f"{self.task} runs on the torch engine only")
        if self.engine == "onnx" and self.precision != "fp32":
            raise ConfigError(f"precision {self.precision} needs the torch engine: the "
                              "ONNX engine runs fp32 (or int8 with quantize)")
        if self.half and self.precision not in ("fp32", "fp16"):
            raise ConfigError(f"half (float16) and precision {self.precision} disagree: set "
                              "precision alone")

    @property
    def engine_id(self) -> str:
        """The engine as a content-cache key: what changes the numbers."""
        if self.engine == "onnx":
            return "onnx" if self.quantize == "none" else f"onnx-{self.quantize}"
        if self.half or self.precision == "fp16":
            return "torch-fp16"
        return "torch-bf16" if self.precision == "bf16" else "torch"

    @property
    def export_task(self) -> str:
        """The ONNX export this spec runs (:data:`~sparkfield.nlp.onnx_engine.EXPORTS`): one
        per model folder and export task, so heads of one task share it."""
        return "embedding" if self.task == "embedding" else ONNX_HEADS[HEADS[self.task]][1]

    def build(self):
        gpus = task_gpu_addresses()
        folder = self.folder_here()
        if self.engine == "torch":
            import torch

            from sparkfield.nlp.encoder import Encoder

            device = choose_device(self.device, gpus, torch.cuda.is_available())
            if self.task != "embedding":
                return self.head_class()(folder, device, self.max_tokens,
                                         threads=self.threads, precision=self.precision,
                                         **self.head_options())
            return Encoder(folder, device, self.max_tokens, self.half, self.threads,
                           precision=self.precision)
        from sparkfield.nlp.onnx_engine import OnnxEncoder

        # on the CPU, torch is not imported only to ask it about GPUs
        device = "cpu" if self.device == "cpu" else choose_device(
            self.device, gpus, _cuda_visible(gpus))
        if self.task != "embedding":
            return self.head_class()(folder, device, self.max_tokens, threads=self.threads,
                                     precision=self.precision, quantize=self.quantize,
                                     onnx_dir=self.onnx_dir,
                                     path=self._onnx_file_here(folder), **self.head_options())
        return OnnxEncoder(folder, device, self.max_tokens, self.threads,
                           self.quantize, self.onnx_dir, self._onnx_file_here(folder))

    def head_class(self) -> type:
        """The class of :data:`HEADS` that runs this task (on the ONNX engine, its twin of
        :data:`ONNX_HEADS`)."""
        head = HEADS[self.task] if self.engine == "torch" else ONNX_HEADS[HEADS[self.task]][0]
        module, _, name = head.partition(":")
        return getattr(importlib.import_module(module), name)

    def head_options(self) -> dict[str, object]:
        """The head's own constructor options this spec carries."""
        if self.task in ("sequence-classification", "zero-shot-classification"):
            return {"function": self.function}
        return {}

    def folder_here(self) -> Path:
        """The model folder as this process sees it, checked: the executor's copy when the
        driver shipped it, else the folder itself, or the bundled model of this environment."""
        return check_model_dir(shipped_dir(self.folder, self.version) if self.folder
                               else None)

    def shipped_folders(self) -> list[str]:
        """The driver folders the executors need: the model, and the folder of an ONNX
        export kept outside it (``onnx_dir``)."""
        if self.folder is None:
            return []
        folders = [self.folder]
        if self.onnx_file is not None and not Path(self.onnx_file).is_relative_to(self.folder):
            folders.append(str(Path(self.onnx_file).parent))
        return folders

    def _onnx_file_here(self, folder: Path) -> Path | None:
        """The driver's ONNX export as this worker sees it: inside its copy of the model
        folder, or in the shipped export folder; None: the encoder exports when missing."""
        if self.onnx_file is None or self.folder is None:
            return None
        file = Path(self.onnx_file)
        if file.is_relative_to(self.folder):
            return folder / file.relative_to(self.folder)
        return shipped_dir(file.parent, self.version) / file.name


def _cuda_visible(gpus: list[str]) -> bool:
    """A GPU for the ONNX engine: one Spark assigned, or one torch sees where torch is."""
    if gpus:
        return True
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


_ENCODERS: dict[EngineSpec, object] = {}


def worker_encoder(spec: EngineSpec):
    """The encoder of this Python worker process, built on first use (workers are reused
    across tasks, so the model loads once per worker)."""
    if spec not in _ENCODERS:
        _ENCODERS[spec] = spec.build()
    return _ENCODERS[spec]
