"""Sequence classification on one GPU: the engine a ``TextClassifier`` task runs
(:class:`sparkfield.nlp.heads.SequenceClassifier`: tokenising, length bucketing, batches, the
model, softmax) in 1, 2, 4 and 8 processes sharing the GPU (as 1-8 Spark tasks per GPU would),
in fp32, fp16 and bf16, against a plain ``transformers`` fp16 forward loop in the same run.

The model is BERT-base sized (12 layers, hidden 768, random weights, seeded), written with
``save_pretrained`` to a temporary folder with a tokenizer built from the vocabulary carried in
``benchmarks/data`` (nothing downloaded); every text is cut to ``--tokens`` (128) tokens.
Needs torch, transformers, tokenizers and numpy, not pyspark or Java.

Each process loads its model, warms up, waits for the others, then classifies for
``--seconds``; sequences/s is all processes' sequences over the longest of their times. GPU
utilisation and memory are sampled with nvidia-smi while they run.

Usage: PYTHONPATH=libs python benchmarks/gpu_inference.py [--seconds 8] [--procs 1,2,4,8]
       python benchmarks/gpu_inference.py --smoke   (a tiny model on the CPU: checks the script)
Without CUDA (and without --smoke) it prints one line and exits 77 (this machine cannot run it:
`make bench` goes on to the next script).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB = ROOT / "benchmarks" / "data" / "bert-uncased-vocab.txt"
try:  # the repo's library when it is not installed (PYTHONPATH=libs does the same)
    import sparkfield  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "libs"))

LABELS = ("negative", "neutral", "positive")
SPECIALS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
            "cls_token": "[CLS]", "mask_token": "[MASK]"}


@dataclass
class Sizes:
    layers: int = 12
    hidden: int = 768
    heads: int = 12
    texts: int = 2048  # distinct texts each process cycles through
    chunk: int = 512  # texts per classify call (an Arrow batch)


def build_model(folder: Path, sizes: Sizes) -> Path:
    """A random-weight BertForSequenceClassification and its tokenizer, in ``folder``."""
    import torch
    import transformers
    from tokenizers.implementations import BertWordPieceTokenizer

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=sum(1 for _ in VOCAB.open(encoding="utf-8")), hidden_size=sizes.hidden,
        num_hidden_layers=sizes.layers, num_attention_heads=sizes.heads,
        intermediate_size=4 * sizes.hidden, max_position_embeddings=512,
        id2label=dict(enumerate(LABELS)), label2id={v: i for i, v in enumerate(LABELS)})
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    BertWordPieceTokenizer(str(VOCAB), lowercase=True).save(str(folder / "tokenizer.json"))
    shutil.copy(VOCAB, folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512,
         **SPECIALS}))
    (folder / "special_tokens_map.json").write_text(json.dumps(SPECIALS))
    return folder


def make_texts(n: int, words: int, seed: int) -> list[str]:
    """``n`` texts of ``words`` whole words drawn from the vocabulary (seeded): a word is
    one token, so every text is longer than ``words`` - 16 tokens."""
    import numpy as np

    vocab = [w for w in VOCAB.read_text(encoding="utf-8").split("\n")
             if w.isalpha() and w.isascii()]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(vocab, words)) for _ in range(n)]


@dataclass
class Job:
    folder: str
    device: str
    precisions: list[str]
    tokens: int
    batch_size: int
    seconds: float
    sizes: Sizes = field(default_factory=Sizes)
    threads: int = 1  # CPU threads per process (a Spark task's spark.task.cpus)


def worker(rank: int, job: Job, barrier, results) -> None:
    """One task's process: per precision, load, warm up, wait for all, run, report."""
    import torch

    from sparkfield.nlp.encoder import Split
    from sparkfield.nlp.heads import SequenceClassifier

    texts = make_texts(job.sizes.texts, job.tokens + 16, seed=rank)  # all cut to tokens
    chunks = [texts[i:i + job.sizes.chunk] for i in range(0, len(texts), job.sizes.chunk)]
    for precision in job.precisions:
        model = SequenceClassifier(Path(job.folder), job.device, job.tokens,
                                   threads=job.threads, precision=precision)
        model.classify(chunks[0][:job.batch_size * 2], batch_size=job.batch_size)  # warm-up
        barrier.wait()
        split, n, k = Split(), 0, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < job.seconds:
            chunk = chunks[k % len(chunks)]
            result = model.classify(chunk, None, job.batch_size, True, split)
            n, k = n + len(result.best), k + 1
        elapsed = time.perf_counter() - t0
        barrier.wait()
        results.put({"precision": precision, "rank": rank, "n": n, "seconds": elapsed,
                     "lengths": int(model.tokenize(chunk[:1]).lengths[0]),
                     "split": {p: getattr(split, p) for p in ("tokenise", "model", "pool")}})
        del model
        if job.device.startswith("cuda"):
            torch.cuda.empty_cache()


class Sampler:
    """nvidia-smi's utilisation (%) and memory used (MiB) of one GPU, every 0.5 s."""

    def __init__(self, index: int, enabled: bool) -> None:
        self.index, self.enabled = index, enabled and shutil.which("nvidia-smi") is not None
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()

    def __enter__(self) -> Sampler:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        cmd = ["nvidia-smi", "-i", str(self.index), "--format=csv,noheader,nounits",
               "--query-gpu=utilization.gpu,memory.used"]
        while not self._stop.wait(0.5):
            out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
            try:
                util, mem = (float(v) for v in out.split(","))
            except ValueError:
                continue
            self.samples.append((util, mem))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join()

    def summary(self) -> str:
        if not self.samples:
            return "n/a"
        utils = sorted(u for u, _ in self.samples)
        return (f"{sum(utils) / len(utils):.0f}% (median {utils[len(utils) // 2]:.0f}%), "
                f"{max(m for _, m in self.samples):.0f} MiB")


def _watch(pool: list, barrier) -> None:
    """Break the barrier as soon as a worker dies, so the run ends at once, not at a
    timeout."""
    while any(p.exitcode is None for p in pool):
        if any(p.exitcode not in (None, 0) for p in pool):
            barrier.abort()
            return
        time.sleep(1)


def run_pool(job: Job, procs: int, gpu_index: int) -> None:
    """``procs`` worker processes through every precision; one printed line per precision."""
    ctx = mp.get_context("spawn")  # CUDA in children needs spawn
    barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
    pool = [ctx.Process(target=worker, args=(r, job, barrier, results)) for r in range(procs)]
    for p in pool:
        p.start()
    threading.Thread(target=_watch, args=(pool, barrier), daemon=True).start()
    try:
        for precision in job.precisions:
            barrier.wait(timeout=600)
            with Sampler(gpu_index, job.device.startswith("cuda")) as sampler:
                barrier.wait(timeout=job.seconds * 4 + 120)
            rows = [results.get(timeout=120) for _ in range(procs)]
            n = sum(r["n"] for r in rows)
            wall = max(r["seconds"] for r in rows)
            parts = {p: sum(r["split"][p] for r in rows) for p in ("tokenise", "model", "pool")}
            total = sum(parts.values()) or 1.0
            shares = " ".join(f"{p} {v / total:.0%}" for p, v in parts.items())
            print(f"{'sparkfield engine':<34}{precision:<6}{procs:>6}{n / wall:>12.1f}"
                  f"   {rows[0]['lengths']} tokens, {job.threads} CPU threads each; {shares}; "
                  f"GPU {sampler.summary()}",
                  flush=True)
    except Exception as exc:  # a worker died: its traceback is above
        print(f"error: {procs} processes, {type(exc).__name__}: {exc}", flush=True)
        for p in pool:
            p.terminate()
        raise SystemExit(1) from exc
    for p in pool:
        p.join()


def plain_transformers(job: Job, gpu_index: int) -> None:
    """The obvious alternative: one process, AutoModelForSequenceClassification in fp16 (fp32
    on the CPU), batches of ``batch_size``; model only (pre-tokenised on the device), then
    tokenising each batch too."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    cuda = job.device.startswith("cuda")
    dtype = torch.float16 if cuda else torch.float32
    model = AutoModelForSequenceClassification.from_pretrained(job.folder, dtype=dtype)
    model = model.to(job.device).eval()
    tok = AutoTokenizer.from_pretrained(job.folder)
    texts = make_texts(job.batch_size * 16, job.tokens + 16, seed=99)
    batches = [texts[i:i + job.batch_size] for i in range(0, len(texts), job.batch_size)]

    def encode(batch: list[str]):
        return tok(batch, truncation=True, max_length=job.tokens, padding=True,
                   return_tensors="pt").to(job.device)

    ready = encode(batches[0])
    for name, step in (("model only", lambda i: model(**ready).logits),
                       ("tokenise + model", lambda i: torch.softmax(
                           model(**encode(batches[i % len(batches)])).logits.float(), -1)
                        .cpu())):
        with torch.inference_mode():
            step(0)
            if cuda:
                torch.cuda.synchronize()
            n, i = 0, 0
            with Sampler(gpu_index, cuda) as sampler:
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < job.seconds:
                    step(i)
                    n, i = n + job.batch_size, i + 1
                if cuda:
                    torch.cuda.synchronize()
                wall = time.perf_counter() - t0
        label = "fp16" if cuda else "fp32"
        print(f"{'transformers, ' + name:<34}{label:<6}{1:>6}{n / wall:>12.1f}"
              f"   GPU {sampler.summary()}", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", default="1,2,4,8", help="process counts (comma-separated)")
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per run")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per sequence")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny model on the CPU, fp32, 1-2 processes: checks the script")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    import torch

    sizes, procs = Sizes(), [int(p) for p in args.procs.split(",")]
    cores = len(os.sched_getaffinity(0))
    precisions = args.precisions.split(",")
    if args.smoke:
        sizes = Sizes(layers=2, hidden=32, heads=2, texts=64, chunk=32)
        procs, precisions, device = [p for p in procs if p <= 2] or [1], ["fp32"], "cpu"
        args.seconds, args.tokens, args.batch_size = min(args.seconds, 1.0), 32, 8
        gpu, index = "CPU (smoke run)", 0
    elif not torch.cuda.is_available():
        print("error: no CUDA device visible to torch (a CPU build, or no GPU here); "
              "pass --smoke for a CPU check of the script", flush=True)
        return 77
    else:
        index = torch.cuda.current_device()
        device, gpu = f"cuda:{index}", torch.cuda.get_device_name(index)
        if "bf16" in precisions and not torch.cuda.is_bf16_supported():
            print(f"{gpu}: no bf16 support, bf16 left out")
            precisions.remove("bf16")
    import transformers

    print(f"GPU: {gpu}; torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{sizes.layers} layers, hidden {sizes.hidden}; {args.tokens} tokens per sequence, "
          f"batches of {args.batch_size}, {args.seconds:g} s per run", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-inference-") as tmp:
        job = Job(str(build_model(Path(tmp), sizes)), device, precisions, args.tokens,
                  args.batch_size, args.seconds, sizes)
        print(f"{'engine':<34}{'dtype':<6}{'procs':>6}{'seq/s':>12}", flush=True)
        started = time.perf_counter()
        for n in procs:
            run_pool(dataclasses.replace(job, threads=max(1, cores // n)), n, index)
        plain_transformers(job, index)
    print(f"total {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
