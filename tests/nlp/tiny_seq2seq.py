"""Tiny random-weight sequence-to-sequence models (Marian, T5, BART) saved with
``save_pretrained`` (seeded), each with a Unigram tokenizer trained here on real sentences and
saved as a fast tokenizer (tokenizer.json, tokenizer_config.json): model folders as a
fine-tuning run leaves them, nothing downloaded."""

from __future__ import annotations

from pathlib import Path

PAD, EOS, UNK, BOS = "<pad>", "</s>", "<unk>", "<s>"
SPECIALS = (PAD, EOS, UNK, BOS)  # ids 0, 1, 2, 3
FAMILIES = ("marian", "t5", "bart")
VOCAB = 400
# added to the eos logit of the random models (their final logits bias), so that some texts
# end before max_new_tokens: T5 has no such bias, its texts always run to the limit
EOS_BIAS = {"marian": 5.0, "t5": 0.0, "bart": 4.0}


def train_tokenizer(sentences: list[str], bos: bool = False):
    """A Unigram tokenizer (sentencepiece-style spaces) whose encodings end with ``</s>``
    (and start with ``<s>`` where ``bos``), as Marian, T5 and BART tokenizers do."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=VOCAB, special_tokens=list(SPECIALS),
                                      unk_token=UNK)
    tok.train_from_iterator(sentences, trainer)
    ids = [(t, tok.token_to_id(t)) for t in (BOS, EOS)]
    single = f"{BOS} $A {EOS}" if bos else f"$A {EOS}"
    pair = f"{BOS} $A {EOS} $B {EOS}" if bos else f"$A {EOS} $B {EOS}"
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                       special_tokens=ids)
    return tok


def _config(family: str, vocab: int, layers: int, d_model: int):
    import transformers

    common = {"vocab_size": vocab, "pad_token_id": 0, "eos_token_id": 1}
    if family == "t5":
        return transformers.T5Config(
            d_model=d_model, d_kv=d_model // 2, d_ff=2 * d_model, num_layers=layers,
            num_decoder_layers=layers, num_heads=2, decoder_start_token_id=0,
            initializer_factor=4.0, **common)
    sizes = {"d_model": d_model, "encoder_layers": layers, "decoder_layers": layers,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2,
             "encoder_ffn_dim": 2 * d_model, "decoder_ffn_dim": 2 * d_model,
             "max_position_embeddings": 256, "init_std": 0.3}
    if family == "marian":
        # an eos forced at the limit, as the Opus-MT models' configs ask
        return transformers.MarianConfig(decoder_start_token_id=0, forced_eos_token_id=1,
                                         **sizes, **common)
    return transformers.BartConfig(bos_token_id=3, decoder_start_token_id=1,
                                   forced_eos_token_id=None, **sizes, **common)


CLASSES = {"marian": "MarianMTModel", "t5": "T5ForConditionalGeneration",
           "bart": "BartForConditionalGeneration"}


def build(folder: Path, family: str, sentences: list[str], seed: int = 0, layers: int = 2,
          d_model: int = 32) -> Path:
    """A tiny ``family`` model (:data:`FAMILIES`) with its own tokenizer in ``folder``."""
    import torch
    import transformers

    tok = train_tokenizer(sentences, bos=family == "bart")
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK,
        **({"bos_token": BOS} if family == "bart" else {}))
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    model = getattr(transformers, CLASSES[family])(
        _config(family, tok.get_vocab_size(), layers, d_model))
    if EOS_BIAS[family]:
        with torch.no_grad():
            model.final_logits_bias[0, 1] += EOS_BIAS[family]
    model.eval().save_pretrained(folder)
    return folder
