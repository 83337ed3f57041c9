"""The classification heads on the ONNX Runtime engine: :class:`OnnxSequenceClassifier` and
:class:`OnnxTokenTagger` run an ONNX export of the model's logits
(:func:`~sparkfield.nlp.onnx_engine.ensure_onnx`, fp32 or dynamic int8) and are otherwise
:class:`~sparkfield.nlp.heads.SequenceClassifier` and :class:`~sparkfield.nlp.heads.TokenTagger`:
the same config reading, tokenising, length bucketing, batching and scores from logits, so
their ``classify`` / ``tag`` results are those of the torch heads and everything downstream
(the Spark stages, the entity grouping) is the same.

Only :meth:`forward` differs: the export's logits instead of the torch model's, so neither
torch nor the torch model is loaded on the workers. Like the heads, this imports no pyspark."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sparkfield.core.errors import ConfigError
from sparkfield.nlp.encoder import Encoder
from sparkfield.nlp.heads import SequenceClassifier, TokenTagger
from sparkfield.nlp.onnx_engine import ensure_onnx, onnx_session, require_onnxruntime


@dataclass
class _OnnxLogits(Encoder):
    """The ONNX forward pass of a classifier: its export loaded in an onnxruntime session in
    place of the torch model (a head class lists this after its torch head, whose
    ``__post_init__`` reads the config and then comes here)."""

    quantize: str = "none"  # none or int8
    onnx_dir: str | None = None  # where exports are cached (None: inside the model folder)
    path: Path | None = None  # an export made beforehand (the driver's); None: ensure_onnx

    export = ""  # the export's task (onnx_engine.EXPORTS)

    def __post_init__(self) -> None:
        if self.precision != "fp32":
            raise ConfigError(f"precision {self.precision} needs the torch engine: the ONNX "
                              "engine runs fp32 (or int8 with quantize)")
        require_onnxruntime()
        self._load_tokenizer()
        if self.path is None:
            self.path = ensure_onnx(self.folder, self.onnx_dir, self.quantize, task=self.export)
        self.session = onnx_session(self.path, self.device, self.threads)
        self.inputs = [i.name for i in self.session.get_inputs()]

    def forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Logits float32, as the torch heads' forward gives them."""
        return self.session.run(None, {k: batch[k] for k in self.inputs})[0]


@dataclass
class OnnxSequenceClassifier(SequenceClassifier, _OnnxLogits):
    """A ``*ForSequenceClassification`` model's export: texts (or pairs) -> label scores."""

    export = "sequence-classification"
    forward = _OnnxLogits.forward


@dataclass
class OnnxTokenTagger(TokenTagger, _OnnxLogits):
    """A ``*ForTokenClassification`` model's export: texts -> per-token label scores."""

    export = "token-classification"
    forward = _OnnxLogits.forward
