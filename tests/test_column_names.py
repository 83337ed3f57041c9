"""Every public DataFrame function of the text and process areas that takes a column name
gives the same rows for columns named with a dot, a space and backticks as for plain names:
the names are column names, never field paths or quoting syntax."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import types as T

import sparkfield.process as sp
from sparkfield.text import (
    PinnedCountVectorizer,
    html_to_text,
    split_sentences,
    token_vocabulary,
    tokenize,
)

# each odd name holds a dot (a field path to Spark's parser), a space and backticks (quoting)
ODD = "`{}.id x`"


def _names(odd: bool, *plain: str) -> dict[str, str]:
    return {p: ODD.format(p) if odd else p for p in plain}


def _rows(result: object) -> object:
    """What a result holds, comparable across column names: a frame's rows (in an order of
    their own), a dataclass's fields, anything else as it prints."""
    if isinstance(result, DataFrame):
        return sorted((tuple(r) for r in result.collect()), key=repr)
    if dataclasses.is_dataclass(result):
        return {f.name: _rows(getattr(result, f.name)) for f in dataclasses.fields(result)}
    return repr(result)


# ---- process ------------------------------------------------------------------------------

EVENT_COLS = ("case", "activity", "ts", "ord", "res", "attr")
EVENT_SCHEMA = ("case string, activity string, ts timestamp, ord long, res string, "
                "attr string")


def _t(day: int, hour: int) -> datetime:
    return datetime(2024, 3, day, hour)


EVENTS = [
    ("c1", "A", _t(1, 9), 1, "r1", "x"), ("c1", "B", _t(1, 10), 2, "r2", "y"),
    ("c1", "C", _t(1, 11), 3, "r1", None),
    ("c2", "A", _t(1, 12), 4, "r2", "y"), ("c2", "C", _t(2, 9), 5, None, "y"),
    ("c3", "A", _t(2, 10), 6, "r1", "x"), ("c3", "B", _t(2, 10), 7, "r1", "x"),
    ("c3", "B", _t(2, 12), 8, "r2", "y"), ("c3", "C", _t(2, 13), 9, "r2", "x"),
]


def _events(spark, names: dict[str, str]) -> DataFrame:
    return spark.createDataFrame(EVENTS, EVENT_SCHEMA).toDF(*[names[c] for c in EVENT_COLS])


def _ev(n: dict[str, str]) -> dict[str, str]:
    return {"case_col": n["case"], "activity_col": n["activity"], "timestamp_col": n["ts"],
            "order_col": n["ord"]}


Call = Callable[[DataFrame, dict[str, str]], object]

PROCESS: dict[str, Call] = {
    "event_frame": lambda df, n: sp.event_frame(df, **_ev(n)),
    "discover_dfg": lambda df, n: sp.discover_dfg(df, **_ev(n)),
    "start_activities": lambda df, n: sp.start_activities(df, **_ev(n)),
    "end_activities": lambda df, n: sp.end_activities(df, **_ev(n)),
    "case_durations": lambda df, n: sp.case_durations(df, **_ev(n)),
    "variants": lambda df, n: sp.variants(df, **_ev(n)),
    "activities": lambda df, n: sp.activities(df, **_ev(n)),
    "all_views": lambda df, n: sp.all_views(df, **_ev(n)),
    "discover_process_tree": lambda df, n: sp.discover_process_tree(df, **_ev(n)),
    "filter_time_range": lambda df, n: sp.filter_time_range(
        df, "2024-03-01T10:00:00", "2024-03-02T10:00:00", "traces_intersecting", **_ev(n)),
    "filter_variants_top_k": lambda df, n: sp.filter_variants_top_k(df, 1, **_ev(n)),
    "filter_variants_by_coverage_percentage":
        lambda df, n: sp.filter_variants_by_coverage_percentage(df, 0.3, **_ev(n)),
    "filter_case_performance": lambda df, n: sp.filter_case_performance(df, 0, 7200,
                                                                        **_ev(n)),
    "filter_case_size": lambda df, n: sp.filter_case_size(df, 3, **_ev(n)),
    "filter_start_activities": lambda df, n: sp.filter_start_activities(df, ["A"], **_ev(n)),
    "filter_end_activities": lambda df, n: sp.filter_end_activities(df, ["C"], False,
                                                                    **_ev(n)),
    "filter_event_attribute_values": lambda df, n: sp.filter_event_attribute_values(
        df, n["attr"], ["x"], "event", **_ev(n)),
    "filter_directly_follows_relation": lambda df, n: sp.filter_directly_follows_relation(
        df, [("A", "B")], **_ev(n)),
    "filter_eventually_follows_relation":
        lambda df, n: sp.filter_eventually_follows_relation(df, [("A", "C")], **_ev(n)),
    "filter_activities_rework": lambda df, n: sp.filter_activities_rework(df, "B", **_ev(n)),
    "events_over_time": lambda df, n: sp.events_over_time(df, "hour", **_ev(n)),
    "active_cases_over_time": lambda df, n: sp.active_cases_over_time(df, "hour", **_ev(n)),
    "case_duration_distribution": lambda df, n: sp.case_duration_distribution(df, 3,
                                                                              **_ev(n)),
    "activity_frequencies": lambda df, n: sp.activity_frequencies(df, **_ev(n)),
    "resource_frequencies": lambda df, n: sp.resource_frequencies(df, n["res"], **_ev(n)),
    "resource_activity_matrix": lambda df, n: sp.resource_activity_matrix(df, n["res"],
                                                                          **_ev(n)),
    "handover_of_work": lambda df, n: sp.handover_of_work(df, n["res"], **_ev(n)),
}


@pytest.fixture(scope="module")
def plain_process(spark) -> dict[str, object]:
    names = _names(False, *EVENT_COLS)
    return {key: _rows(call(_events(spark, names), names)) for key, call in PROCESS.items()}


@pytest.mark.parametrize("function", PROCESS)
def test_process_functions_take_any_column_name(spark, plain_process, function):
    names = _names(True, *EVENT_COLS)
    assert _rows(PROCESS[function](_events(spark, names), names)) == plain_process[function]


CASE_COLS = ("start", "end", "duration")


@pytest.mark.parametrize("odd", [False, True])
def test_per_case_statistics_take_any_column_name(spark, odd):
    plain = _names(False, *EVENT_COLS)
    table = sp.case_durations(_events(spark, plain), **_ev(plain)).select(*CASE_COLS[:2],
                                                                         "duration_s")
    n = _names(odd, *CASE_COLS)
    table = table.toDF(*[n[c] for c in CASE_COLS])
    got = [_rows(sp.active_cases_from_cases(table, "day", n["start"], n["end"])),
           _rows(sp.case_duration_summary(table, n["duration"])),
           _rows(sp.case_duration_histogram(table, 2, n["duration"]))]
    assert got == [[(datetime(2024, 3, 1), 2), (datetime(2024, 3, 2), 2)],
                   [(3, 7200.0, 10800.0, 31200.0, 75600.0)],
                   [(0, 7200.0, 41400.0, 2), (1, 41400.0, 75600.0, 1)]]


# ---- text ---------------------------------------------------------------------------------

PAGE_COLS = ("doc", "page", "raw", "charset", "text", "title", "error", "tokens", "sentences",
             "idx")
PAGES = [
    ("a", "<html><head><title>Cats</title></head><body><p>Cats chase mice. Dogs chase "
          "cats.</p></body></html>", "<p>Caf\xe9 au lait. Tr\xe8s bon.</p>".encode("latin-1"),
     "text/html; charset=ISO-8859-1"),
    ("b", "<html><body><p>Birds sing songs.</p></body></html>", None, None),
    ("c", None, b"", None),
]
PAGE_SCHEMA = "doc string, page string, raw binary, charset string"


def _pages(spark, n: dict[str, str]) -> DataFrame:
    return spark.createDataFrame(PAGES, PAGE_SCHEMA).toDF(
        *[n[c] for c in ("doc", "page", "raw", "charset")])


def _text_steps(df: DataFrame, n: dict[str, str]) -> dict[str, object]:
    """Each text function (and stage) on ``df``, with the column names of ``n``."""
    parsed = html_to_text(df, n["page"], n["text"], n["title"], n["error"], extract="main")
    raw = html_to_text(df, n["raw"], n["text"], None, n["error"], extract="selector",
                       selector="p", charset_col=n["charset"])
    tokens = tokenize(parsed, n["text"], n["tokens"], "english")
    model = PinnedCountVectorizer(inputCol=n["tokens"], minDF=1.0).fit(tokens)
    return {
        "html_to_text": parsed, "html_to_text_bytes": raw,
        "split_sentences": split_sentences(parsed, n["text"], n["sentences"]),
        "split_sentences_explode": split_sentences(parsed, n["text"], n["sentences"], True,
                                                   n["idx"]),
        "tokenize": tokens, "token_vocabulary": token_vocabulary(tokens, n["tokens"], 10, 1),
        "pinned_vocabulary": model.vocabulary,
    }


def test_text_functions_take_any_column_name(spark):
    plain = {k: _rows(v) for k, v in _text_steps(_pages(spark, _names(False, *PAGE_COLS)),
                                                 _names(False, *PAGE_COLS)).items()}
    names = _names(True, *PAGE_COLS)
    got = {k: _rows(v) for k, v in _text_steps(_pages(spark, names), names).items()}
    assert got == plain
    assert plain["pinned_vocabulary"].startswith("['cats', 'chase', ")  # the plain run worked


def test_the_embedding_input_split_takes_any_column_name(spark):
    from sparkfield.nlp.embed import split_texts

    schema = T.StructType([T.StructField("doc.id", T.StringType()),
                           T.StructField("the `text`", T.StringType())])
    df = spark.createDataFrame([("a", "one text"), ("b", None), (None, "no id")], schema)
    good, bad = split_texts(df, "the `text`", "doc.id")
    assert [tuple(r) for r in good.collect()] == [("a", "one text")]
    assert sorted((r.reason, r.id) for r in bad.collect()) == [
        ("null id", None), ("null text", "b")]
