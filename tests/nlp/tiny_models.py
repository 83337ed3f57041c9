"""Tiny random-weight BERT classifiers saved with ``save_pretrained`` (seeded), with the bundled
all-MiniLM-L6-v2 tokenizer (uncased WordPiece): model folders as a fine-tuning run leaves them,
built in the test, nothing downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.txt")
NER_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")


def bundled_tokenizer_dir() -> Path:
    from sparkfield.nlp.model import default_model_dir

    return default_model_dir()


def build(folder: Path, kind: str, labels: tuple[str, ...], seed: int = 0,
          problem_type: str | None = None, layers: int = 2, hidden: int = 32) -> Path:
    """A ``Bert<kind>`` (ForSequenceClassification, ForTokenClassification) in ``folder``."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=512,
        id2label=dict(enumerate(labels)), label2id={v: i for i, v in enumerate(labels)},
        problem_type=problem_type, initializer_range=0.5)  # wide logits: labels differ
    model = getattr(transformers, f"Bert{kind}")(config)
    model.eval().save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(bundled_tokenizer_dir() / name, folder / name)
    return folder


def build_qa(folder: Path, seed: int = 0) -> Path:
    """A tiny random-weight ``BertForQuestionAnswering`` with the bundled tokenizer."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512,
        initializer_range=0.5)  # wide logits: spans differ
    transformers.BertForQuestionAnswering(config).eval().save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(bundled_tokenizer_dir() / name, folder / name)
    return folder
