"""The bag_of_words parameters come from its schema alone: defaults, checks, the sections the
fetch and the near-duplicate search take, and what a run derives from them."""

from __future__ import annotations

import pandas as pd
import pytest

from sparkfield.core.errors import ConfigError
from sparkfield.text.bag_of_words.parse import EXTRACT_MODES
from sparkfield.text.bag_of_words.vectorise import VECTOR_MODES
from sparkfield.text.params import (
    BAG_OF_WORDS,
    FetchSettings,
    derive,
    duplicate_settings,
    fetch_settings,
)


def test_sections_take_their_defaults_and_checks_from_the_schema():
    s = fetch_settings({"delay_s": 0})
    assert isinstance(s, FetchSettings)
    assert s.delay_s == 0.0 and s.max_retries == BAG_OF_WORDS.by_key["fetch.max_retries"].default
    with pytest.raises(ConfigError, match="fetch.total_timeout_s must be > 0"):
        fetch_settings({"total_timeout_s": 0})
    assert duplicate_settings().threshold == BAG_OF_WORDS.by_key["duplicates.threshold"].default
    with pytest.raises(ConfigError, match="duplicates.hash_tables must be >= 1"):
        duplicate_settings({"hash_tables": 0})


def test_the_choices_are_the_modes_the_code_knows():
    assert BAG_OF_WORDS.by_key["vector"].choices == VECTOR_MODES
    assert BAG_OF_WORDS.by_key["extract"].choices == EXTRACT_MODES


def test_a_run_derives_its_one_source_and_seed():
    d = derive(BAG_OF_WORDS.parse({"source": {"html_dir": "saved/"}}), 7)
    assert (d.source, d.path, d.seed) == ("html_dir", "saved/", 7)
    for source in ({}, {"urls": "u.txt", "pages": "p/"}):
        with pytest.raises(ConfigError, match="give exactly one source"):
            derive(BAG_OF_WORDS.parse({"source": source}), 7)
    with pytest.raises(ConfigError, match="extract: selector needs a CSS selector"):
        derive(BAG_OF_WORDS.parse({"source": {"urls": "u.txt"}, "extract": "selector",
                             "selector": " "}), 7)


def test_fetch_settings_reach_the_python_workers(spark):
    """The executors get the settings by pickling, in processes of their own."""
    settings = fetch_settings({"delay_s": 0.25, "user_agent": "probe/1"})

    def read(batches):
        for b in batches:
            yield pd.DataFrame({"agent": [settings.user_agent] * len(b),
                                "delay": [settings.delay_s] * len(b)})

    rows = spark.range(4).repartition(2).mapInPandas(read, "agent string, delay double") \
        .collect()
    assert {(r["agent"], r["delay"]) for r in rows} == {("probe/1", 0.25)} and len(rows) == 4
