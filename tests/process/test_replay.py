"""Token-based replay (sparkfield.process.analysis.replay) against pm4py's
``conformance_diagnostics_token_based_replay`` and ``fitness_token_based_replay``: per trace
on tiny hand-worked nets, per variant on the reference logs against their own and other nets,
and per case on Spark."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from sparkfield.process.analysis import petri
from sparkfield.process.analysis import replay as replay_module
from sparkfield.process.analysis.inductive import Dfg, discover_process_tree, inductive_miner_dfg
from sparkfield.process.analysis.petri import Arc, PetriNet, Transition
from sparkfield.process.analysis.replay import (
    TokenReplayer,
    log_fitness,
    non_fitting_variants,
    replay_case_table,
    replay_cases,
    replay_trace,
    replay_variants,
)

from . import pm4py_oracle

KEYS = {"case_col": "case:concept:name", "activity_col": "concept:name",
        "timestamp_col": "time:timestamp"}
FIXTURES = ["running-example.xes", "roadtraffic_1t_per_variant.xes.gz"]
SHARED = ["receipt.xes.gz", "sepsis_1t_per_variant.xes.gz",
          "bpic2020_permit_log_1t_per_variant.xes.gz", "hospital_billing_1t_per_variant.xes.gz",
          "bpic2013_closed.xes.gz"]
COUNTS = ["missing", "remaining", "produced", "consumed"]


def _pm4py():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pm4py
    return pm4py


# --- nets and logs --------------------------------------------------------------------------

def net_of(places: list[str], transitions: dict[str, str | None],
           arcs: list[tuple[str, str] | tuple[str, str, int]]) -> PetriNet:
    """A net from place ids, transition id -> label and arcs; ``source`` to ``sink``."""
    return PetriNet("hand", places, [Transition(t, label) for t, label in transitions.items()],
                    [Arc(*a) for a in arcs], {"source": 1}, {"sink": 1})


def skip_net() -> PetriNet:
    """a, then b or skip it: ->(a, X(b, tau))."""
    return net_of(["source", "p1", "sink"], {"ta": "a", "tb": "b", "tau": None},
                  [("source", "ta"), ("ta", "p1"), ("p1", "tb"), ("tb", "sink"),
                   ("p1", "tau"), ("tau", "sink")])


def loop_net() -> PetriNet:
    """a once or more: *(a, tau), entered and left through silent transitions."""
    return net_of(["source", "p1", "p2", "sink"],
                  {"enter": None, "ta": "a", "redo": None, "leave": None},
                  [("source", "enter"), ("enter", "p1"), ("p1", "ta"), ("ta", "p2"),
                   ("p2", "redo"), ("redo", "p1"), ("p2", "leave"), ("leave", "sink")])


def weighted_net() -> PetriNet:
    """a puts one token where b takes two."""
    return net_of(["source", "p1", "sink"], {"ta": "a", "tb": "b"},
                  [("source", "ta"), ("ta", "p1"), ("p1", "tb", 2), ("tb", "sink")])


def imd_net(log) -> PetriNet:
    """Our IMd net of a pandas log's DFG."""
    arcs, starts, ends = (dict(x) for x in _pm4py().discover_dfg(log))
    return petri.from_process_tree(inductive_miner_dfg(Dfg(arcs, starts, ends)))


def pm4py_inductive_net(log, tmp_path: Path, top_k: int) -> PetriNet:
    """pm4py's own inductive net of the ``top_k`` most frequent variants, as PNML pm4py wrote
    and our reader read: a net with pm4py's silent transitions that does not fit the log."""
    pm4py = _pm4py()
    path = tmp_path / f"pm4py_top{top_k}.pnml"
    sub = pm4py.filter_variants_top_k(log, top_k)
    pm4py.write_pnml(*pm4py.discover_petri_net_inductive(sub, noise_threshold=0.2), str(path))
    return petri.read_pnml(path)


@pytest.fixture(scope="module")
def fixture_logs(fixtures_dir):
    return {name: pm4py_oracle.load(fixtures_dir / "process" / name) for name in FIXTURES}


def shared_log(shared_data: Path, name: str):
    return pm4py_oracle.load(shared_data / "process_mining" / "event_logs" / "pm4py" / name)


# --- pm4py as the oracle --------------------------------------------------------------------

def pm4py_diagnostics(log, net: PetriNet, tmp_path: Path) -> dict[str, dict]:
    """pm4py's replay of every case of a pandas log on ``net`` (handed over as PNML), by case
    id: fitness, is_fit and the four token counts."""
    pm4py = _pm4py()
    path = tmp_path / "oracle.pnml"
    petri.write_pnml(net, path)
    pm_net, im, fm = pm4py.read_pnml(str(path))
    diagnostics = pm4py.conformance_diagnostics_token_based_replay(log, pm_net, im, fm)
    cases = list(log.groupby(KEYS["case_col"]).size().index)  # pm4py's order of the cases
    return {str(c): {"fitness": d["trace_fitness"], "is_fit": d["trace_is_fit"],
                     "missing": d["missing_tokens"], "remaining": d["remaining_tokens"],
                     "produced": d["produced_tokens"], "consumed": d["consumed_tokens"]}
            for c, d in zip(cases, diagnostics, strict=True)}


def pm4py_fitness(log, net: PetriNet, tmp_path: Path) -> dict:
    pm4py = _pm4py()
    path = tmp_path / "oracle_fitness.pnml"
    petri.write_pnml(net, path)
    return pm4py.fitness_token_based_replay(log, *pm4py.read_pnml(str(path)))


def traces_by_case(log) -> dict[str, list[str]]:
    return {str(c): list(g[KEYS["activity_col"]])
            for c, g in log.groupby(KEYS["case_col"], sort=False)}


def ours_by_case(log, net: PetriNet) -> dict[str, dict]:
    """Our pure-Python replay of every case, one replay per variant."""
    replayer, memo, out = TokenReplayer(net), {}, {}
    for case, trace in traces_by_case(log).items():
        key = tuple(trace)
        if key not in memo:
            r = replayer.replay(trace)
            memo[key] = {"fitness": r.fitness, "is_fit": r.is_fit, "missing": r.missing,
                         "remaining": r.remaining, "produced": r.produced,
                         "consumed": r.consumed}
        out[case] = memo[key]
    return out


def assert_same(got: dict[str, dict], want: dict[str, dict]) -> None:
    assert got.keys() == want.keys()
    for case, w in want.items():
        g = got[case]
        assert {k: g[k] for k in ("is_fit", *COUNTS)} == {k: w[k] for k in ("is_fit", *COUNTS)}, \
            case
        assert g["fitness"] == pytest.approx(w["fitness"], abs=1e-12), case


# --- hand-worked token counts ---------------------------------------------------------------

def test_skip_fires_the_silent_transition_to_the_final_marking():
    r = replay_trace(skip_net(), ["a"])
    assert r.activated == ("ta", "tau")
    assert (r.produced, r.consumed, r.missing, r.remaining) == (3, 3, 0, 0)
    assert r.is_fit and r.fitness == 1.0


def test_missing_token_is_created_and_the_left_one_remains():
    """b without a: one token created in p1, the source token remains."""
    r = replay_trace(skip_net(), ["b"])
    assert r.activated == ("tb",)
    assert (r.produced, r.consumed, r.missing, r.remaining) == (2, 2, 1, 1)
    assert not r.is_fit and r.fitness == 0.5
    assert r.reached_marking == {"source": 1, "sink": 1}


def test_loop_is_entered_repeated_and_left_through_silent_transitions():
    r = replay_trace(loop_net(), ["a", "a"])
    assert r.activated == ("enter", "ta", "redo", "ta", "leave")
    assert (r.produced, r.consumed, r.missing, r.remaining) == (6, 6, 0, 0)
    assert r.is_fit


def test_activities_not_in_the_model_are_skipped():
    assert replay_trace(loop_net(), ["x", "a", "y", "a", "x"]) == replay_trace(loop_net(),
                                                                              ["a", "a"])


def test_empty_trace_misses_the_final_token_and_leaves_the_initial_one():
    r = replay_trace(loop_net(), [])
    assert (r.produced, r.consumed, r.missing, r.remaining) == (1, 1, 1, 1)
    assert r.fitness == 0.0 and not r.is_fit


def test_a_missing_token_on_a_weighted_arc_adds_the_arc_weight():
    """b needs two tokens in p1 and finds one: one is missing, yet two are added (as pm4py
    does), so one remains after b."""
    r = replay_trace(weighted_net(), ["a", "b"])
    assert (r.produced, r.consumed, r.missing, r.remaining) == (3, 4, 1, 1)
    assert r.fitness == pytest.approx(0.5 * (1 - 1 / 4) + 0.5 * (1 - 1 / 3))


@pytest.mark.parametrize("make", [skip_net, loop_net, weighted_net])
def test_hand_made_nets_equal_pm4py(make, tmp_path):
    import pandas as pd

    traces = [[], ["a"], ["b"], ["a", "b"], ["b", "a"], ["a", "a"], ["a", "a", "b"],
              ["x", "a"], ["b", "b", "a"], ["a", "x", "a", "b"]]
    rows = [{KEYS["case_col"]: f"c{i}", KEYS["activity_col"]: a,
             KEYS["timestamp_col"]: pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(minutes=j)}
            for i, t in enumerate(traces) for j, a in enumerate(t)]
    log = pd.DataFrame(rows)
    nonempty = {f"c{i}": t for i, t in enumerate(traces) if t}
    replayer = TokenReplayer(make())
    got = {}
    for case, trace in nonempty.items():
        r = replayer.replay(trace)
        got[case] = {"fitness": r.fitness, "is_fit": r.is_fit, **{c: getattr(r, c)
                                                                  for c in COUNTS}}
    assert_same(got, pm4py_diagnostics(log, make(), tmp_path))


def test_a_full_table_of_markings_starts_again(fixture_logs, tmp_path, monkeypatch):
    """A replayer that may remember only two markings forgets them and learns again: every
    trace replays as with an unbounded table, and counts() gives replay()'s figures."""
    log = fixture_logs["roadtraffic_1t_per_variant.xes.gz"]
    net = pm4py_inductive_net(log, tmp_path, 10)
    traces = list(traces_by_case(log).values())
    unbounded = TokenReplayer(net)
    want = [unbounded.replay(t) for t in traces]
    assert len(unbounded._markings) > 2
    monkeypatch.setattr(replay_module, "MAX_STATES", 2)
    bounded = TokenReplayer(net)
    assert [bounded.replay(t) for t in traces] == want
    assert [bounded.counts(t) for t in traces] == [
        (r.fitness, r.is_fit, r.missing, r.remaining, r.produced, r.consumed) for r in want]


def test_net_is_validated():
    bad = net_of(["source", "sink"], {"t": "a"}, [("source", "t"), ("t", "nowhere")])
    with pytest.raises(ValueError, match="must join a place and a transition"):
        TokenReplayer(bad)


# --- the reference logs, per variant --------------------------------------------------------

def test_running_example_fits_its_imd_net(fixture_logs, tmp_path):
    log = fixture_logs["running-example.xes"]
    got = ours_by_case(log, imd_net(log))
    assert_same(got, pm4py_diagnostics(log, imd_net(log), tmp_path))
    assert all(r["fitness"] == 1.0 and r["is_fit"] for r in got.values())


@pytest.mark.parametrize("top_k", [1, 2])
def test_running_example_on_a_net_that_does_not_fit(fixture_logs, tmp_path, top_k):
    log = fixture_logs["running-example.xes"]
    net = pm4py_inductive_net(log, tmp_path, top_k)
    got = ours_by_case(log, net)
    assert_same(got, pm4py_diagnostics(log, net, tmp_path))
    assert any(not r["is_fit"] for r in got.values())
    assert any(r["is_fit"] for r in got.values())


def test_roadtraffic_on_the_running_example_net(fixture_logs, tmp_path):
    """Almost no activity of roadtraffic is in the model: the traces are skipped events and
    an unfinished net."""
    log, net = fixture_logs["roadtraffic_1t_per_variant.xes.gz"], \
        imd_net(fixture_logs["running-example.xes"])
    got = ours_by_case(log, net)
    assert_same(got, pm4py_diagnostics(log, net, tmp_path))
    assert not any(r["is_fit"] for r in got.values())


@pytest.mark.parametrize("miner", ["inductive", "heuristics"])
def test_roadtraffic_on_pm4py_nets_that_need_recursive_enabling(fixture_logs, tmp_path, miner):
    """pm4py's nets of the ten most frequent variants: some visible transitions are enabled
    only by enabling, first, a silent transition on the path towards them."""
    pm4py = _pm4py()
    log = fixture_logs["roadtraffic_1t_per_variant.xes.gz"]
    if miner == "inductive":
        net = pm4py_inductive_net(log, tmp_path, 10)
    else:
        path = tmp_path / "heuristics.pnml"
        pm4py.write_pnml(*pm4py.discover_petri_net_heuristics(
            pm4py.filter_variants_top_k(log, 10)), str(path))
        net = petri.read_pnml(path)
    assert_same(ours_by_case(log, net), pm4py_diagnostics(log, net, tmp_path))


@pytest.mark.parametrize("name", SHARED)
def test_shared_logs_on_their_own_and_other_nets(shared_data, fixture_logs, tmp_path, name):
    log = shared_log(shared_data, name)
    nets = {"own": imd_net(log), "own top-3": imd_net(_pm4py().filter_variants_top_k(log, 3)),
            "pm4py top-5": pm4py_inductive_net(log, tmp_path, 5),
            "running example": imd_net(fixture_logs["running-example.xes"])}
    for label, net in nets.items():
        want = pm4py_diagnostics(log, net, tmp_path)
        assert_same(ours_by_case(log, net), want)
        if label == "own":
            assert all(r["is_fit"] for r in want.values())


# --- on Spark -------------------------------------------------------------------------------

def spark_log(spark, log):
    return spark.createDataFrame(log[list(KEYS.values())].astype({KEYS["case_col"]: str}))


def by_case(rows) -> dict[str, dict]:
    return {r["case_id"]: {k: r[k] for k in ("fitness", "is_fit", *COUNTS)} for r in rows}


def check_spark(spark, log, net: PetriNet, tmp_path: Path):
    """replay_cases equals pm4py per case; log_fitness equals fitness_token_based_replay."""
    replayed = replay_cases(spark_log(spark, log), net, **KEYS)
    assert replayed.columns == ["case_id", "fitness", "is_fit", *COUNTS]
    assert_same(by_case(replayed.collect()), pm4py_diagnostics(log, net, tmp_path))
    want = pm4py_fitness(log, net, tmp_path)
    got = log_fitness(replayed)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key
    return replayed


def test_spark_running_example_fits_the_imd_net_of_discover_process_tree(spark, fixture_logs,
                                                                         tmp_path):
    log = fixture_logs["running-example.xes"]
    net = petri.from_process_tree(discover_process_tree(spark_log(spark, log), **KEYS))
    replayed = check_spark(spark, log, net, tmp_path)
    assert {(r.fitness, r.is_fit) for r in replayed.collect()} == {(1.0, True)}
    assert non_fitting_variants(replay_variants(spark_log(spark, log), net, **KEYS)).count() == 0


def test_spark_running_example_on_a_net_that_does_not_fit(spark, fixture_logs, tmp_path):
    log = fixture_logs["running-example.xes"]
    net = pm4py_inductive_net(log, tmp_path, 1)
    replayed = check_spark(spark, log, net, tmp_path)
    assert log_fitness(replayed)["percentage_of_fitting_traces"] < 100.0
    variants = replay_variants(spark_log(spark, log), net, **KEYS)
    unfit = non_fitting_variants(variants).collect()
    ours = ours_by_case(log, net)
    traces = traces_by_case(log)
    want = {}
    for case, r in ours.items():
        if not r["is_fit"]:
            want[tuple(traces[case])] = want.get(tuple(traces[case]), 0) + 1
    assert {tuple(r.variant): r.cases for r in unfit} == want
    assert [r.cases for r in unfit] == sorted((r.cases for r in unfit), reverse=True)
    assert log_fitness(variants) == pytest.approx(log_fitness(replayed))


def test_spark_roadtraffic_on_the_running_example_net(spark, fixture_logs, tmp_path):
    net = imd_net(fixture_logs["running-example.xes"])
    check_spark(spark, fixture_logs["roadtraffic_1t_per_variant.xes.gz"], net, tmp_path)


@pytest.mark.parametrize("name", ["receipt.xes.gz", "sepsis_1t_per_variant.xes.gz"])
def test_spark_shared_logs(spark, shared_data, tmp_path, name):
    log = shared_log(shared_data, name)
    check_spark(spark, log, imd_net(log), tmp_path)
    check_spark(spark, log, pm4py_inductive_net(log, tmp_path, 3), tmp_path)


def test_spark_case_table_with_a_variant_in_several_partitions(spark, monkeypatch):
    """One partition per group of ids: each variant's cases come in several rows, replayed in
    several tasks, and every case still gets one row with its variant's figures."""
    monkeypatch.setattr(replay_module, "CASE_PARTITIONS_PER_ROW", 1)
    traces = [["a"], ["b"], ["a", "b"], ["b", "a"], ["a", "a"], ["x", "a"], ["b", "b", "a"]]
    rows = [(f"c{i}-{k}", t) for i, t in enumerate(traces) for k in range(4)]
    case_variants = spark.createDataFrame(rows, "case_id string, variant array<string>")
    replayed = replay_case_table(case_variants.repartition(4), skip_net())
    assert replayed.columns == ["case_id", "fitness", "is_fit", *COUNTS]
    replayer = TokenReplayer(skip_net())
    assert {r[0]: tuple(r[1:]) for r in replayed.collect()} == {
        case: replayer.counts(trace) for case, trace in rows}


def test_spark_replayed_cases_join_the_counted_variants(spark):
    """The jobs' path: variants counted by their JSON (as the views count them), read back
    with ``from_json`` and replayed once each, then joined to the cases by that JSON. Names
    that JSON escapes come back the same; a case whose variant was not replayed keeps its
    row, with null figures."""
    odd = ['say "hi"', "back\\slash", "tab\there", "line\nbreak", "é ü 東京", "a/b</x>", "\u2028"]
    traces = [["a"], ["a", "b"], odd, odd[::-1], ["b", *odd[:2]]]
    rows = [(f"c{i}-{k}", t) for i, t in enumerate(traces) for k in range(i + 1)]
    case_table = spark.createDataFrame(rows, "case_id string, seq array<string>").select(
        "case_id", F.to_json("seq").alias("variant"))
    counted = case_table.groupBy("variant").agg(F.count(F.lit(1)).alias("cases")).select(
        F.from_json("variant", "array<string>").alias("variant"), "cases")
    replayed = replay_module.replay_counted_variants(counted, skip_net())
    assert sorted((tuple(r.variant), r.cases) for r in replayed.collect()) == sorted(
        (tuple(t), i + 1) for i, t in enumerate(traces))
    cases = replay_module.replayed_cases(case_table, replayed)
    assert cases.columns == ["case_id", "fitness", "is_fit", *COUNTS]
    replayer = TokenReplayer(skip_net())
    got = {r[0]: tuple(r[1:]) for r in cases.collect()}
    assert got == {case: replayer.counts(trace) for case, trace in rows}
    partial = replay_module.replayed_cases(case_table, replayed.where(F.size("variant") > 1))
    lone = {r[0]: tuple(r[1:]) for r in partial.collect()}
    assert len(lone) == len(rows) and lone["c0-0"] == (None,) * 6
    assert lone["c1-0"] == got["c1-0"]
