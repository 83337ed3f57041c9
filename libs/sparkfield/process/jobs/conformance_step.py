"""Conformance of the event_log and process_mining jobs' log: token-based replay of every case
against a Petri net (the model the job discovered, or one the user gives as PNML), on the
executors: each distinct variant of the views' variant table is replayed once, and each case
of their case table gets its variant's results (a join on the variant)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import InputError
from sparkfield.core.io import read_bytes
from sparkfield.core.practices import cached
from sparkfield.process.analysis.petri import PetriNet, PnmlError, read_pnml
from sparkfield.process.analysis.replay import (
    log_fitness,
    non_fitting_variants,
    replay_counted_variants,
    replayed_cases,
)


@dataclass
class Conformance:
    """Per-case replay results (a Spark frame, cached), the non-fitting variants (collected)
    and pm4py's log-level figures."""

    cases: DataFrame  # case_id, fitness, is_fit, missing, remaining, produced, consumed
    non_fitting: pd.DataFrame  # variant (JSON array), cases, fitness, missing, remaining
    figures: dict[str, float]


def load_model(spark: SparkSession, path: str) -> PetriNet:
    """A user's PNML model from any Hadoop filesystem path; InputError names the problem."""
    try:
        net = read_pnml(io.BytesIO(read_bytes(spark, path)))
    except PnmlError as exc:
        raise InputError(f"{path}: {str(exc).removeprefix('PNML: ')}") from None
    if not net.initial_marking:
        raise InputError(f"{path}: the net has no initial marking (no place holds a token)")
    return net


def label_mismatch(net: PetriNet, activities: Iterable[str], examples: int = 5) -> str | None:
    """What to tell the user when the model's labels miss the log's activities: labels are
    compared exactly, so a model labelling none or under half of them (or some only when
    spaces or case are ignored) makes those cases unfit for a reason replay does not show.
    None when the labels cover at least half of the activities exactly."""
    acts, labels = sorted(set(activities)), net.labels
    missing = [a for a in acts if a not in labels]
    by_norm = {_norm(label): label for label in sorted(labels)}
    near = {a: by_norm[_norm(a)] for a in missing if _norm(a) in by_norm}
    if 2 * (len(acts) - len(missing)) >= len(acts) and not near:
        return None
    matched = len(acts) - len(missing)
    text = (f"the conformance model labels none of the log's {len(acts)} activities"
            if not matched else
            f"the conformance model labels only {matched} of the log's {len(acts)} activities")
    text += f" (not in the model: {_some(missing, examples)}"
    text += f"; its labels: {_some(sorted(labels), examples)})"
    if near:
        pairs = ", ".join(f"{a!r} ~ {lab!r}" for a, lab in list(near.items())[:examples])
        text += f"; differing only in spaces or case: {pairs}"
    return text + ": labels are compared exactly, so cases with those activities do not fit"


def _norm(label: str) -> str:
    return " ".join(label.split()).casefold()


def _some(names: list[str], n: int) -> str:
    """The first ``n`` names quoted, and how many more."""
    if not names:
        return "none"
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(repr(x) for x in names[:n]) + more


def check_conformance(case_table: DataFrame, variants: DataFrame, net: PetriNet,
                      stack: ExitStack) -> Conformance:
    """Replay the variants of ``variants`` (one row per variant: ``variant``, its activities
    as a JSON array, and ``cases``, as the views count them) on ``net``, and give each case of
    ``case_table`` (``case_id``, ``variant``) its variant's results; the variants' results
    stay cached until ``stack`` closes. The per-case sequences are not read again."""
    counted = variants.select(F.from_json("variant", "array<string>").alias("variant"),
                              "cases")
    replayed = stack.enter_context(cached(replay_counted_variants(counted, net),
                                          "replayed_variants"))
    bad = non_fitting_variants(replayed).withColumn("variant", F.to_json("variant"))
    return Conformance(cases=replayed_cases(case_table, replayed), non_fitting=bad.toPandas(),
                       figures=log_fitness(replayed))
