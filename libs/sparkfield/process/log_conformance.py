"""Conformance of the event_log and process_mining jobs' log: token-based replay of every case
against a Petri net (the model the job discovered, or one the user gives as PNML), on the
executors: each distinct variant is replayed, and the per-case results are its results spread
over the case ids its rows carry (no join)."""

from __future__ import annotations

import io
from contextlib import ExitStack
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkfield.core.errors import InputError
from sparkfield.core.io import read_bytes
from sparkfield.core.practices import cached
from sparkfield.process.petri import PetriNet, PnmlError, read_pnml
from sparkfield.process.replay import (
    log_fitness,
    non_fitting_variants,
    replay_case_table,
    replay_case_variants,
)
from sparkfield.process.schema import CASE


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


def check_conformance(seqs: DataFrame, net: PetriNet, stack: ExitStack) -> Conformance:
    """Replay the cases of ``seqs`` (one row per case: ``seq``, its events in order, as the
    views build it) on ``net``; the variants' results stay cached until ``stack`` closes."""
    case_variants = seqs.select(CASE, F.col("seq.a").alias("variant"))
    variants = stack.enter_context(cached(replay_case_variants(case_variants, net),
                                          "replayed_variants"))
    bad = non_fitting_variants(variants).withColumn("variant", F.to_json("variant"))
    return Conformance(cases=replay_case_table(case_variants, net), non_fitting=bad.toPandas(),
                       figures=log_fitness(variants))
