"""IMd (sparkfield.process.analysis.inductive) against pm4py's IMd on the same DFG, and the
Petri net of a tree (sparkfield.process.analysis.petri) against pm4py's: PNML both ways, the
language through alignments, token replay and the SVG drawing.

Trees are compared after :meth:`ProcessTree.normalised` on both sides: the children of ``X``
and ``+`` sorted by their string, the children of ``->`` and ``*`` left in order."""

from __future__ import annotations

import html
import io
import itertools
import random
import shutil
import warnings
from collections import Counter
from pathlib import Path

import pytest

from sparkfield.process.analysis import petri
from sparkfield.process.analysis.inductive import (
    Dfg,
    ProcessTree,
    discover_process_tree,
    inductive_miner_dfg,
    simplify,
)
from sparkfield.process.analysis.process_map import RenderError

from . import pm4py_oracle

KEYS = {"case_col": "case:concept:name", "activity_col": "concept:name",
        "timestamp_col": "time:timestamp"}
FIXTURE_LOGS = ["running-example.xes", "roadtraffic_1t_per_variant.xes.gz"]
# every pm4py reference log that loads in a few seconds (bpic2012.xes.gz alone takes ~10 s)
SHARED_LOGS = ["bpic2012_1t_per_variant.xes.gz", "bpic2013_closed.xes.gz",
               "bpic2020_permit_log_1t_per_variant.xes.gz",
               "hospital_billing_1t_per_variant.xes.gz", "receipt.xes.gz", "receipt.csv",
               "roadtraffic100traces.xes", "roadtraffic100traces.csv", "running-example.csv",
               "sepsis_1t_per_variant.xes.gz"]
OPS = {"->": "seq", "X": "xor", "+": "and", "*": "loop"}


def T(op: str, *kids) -> ProcessTree:
    """A tree from pm4py's operator symbols; strings are activities, None is tau."""
    return ProcessTree(OPS[op], None, tuple(
        k if isinstance(k, ProcessTree) else ProcessTree(label=k) for k in kids))


def A(label: str | None) -> ProcessTree:
    return ProcessTree(label=label)


# --- pm4py as the oracle --------------------------------------------------------------------

def _pm4py():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pm4py
    return pm4py


def from_pm4py(tree) -> ProcessTree:
    if not tree.children:
        return ProcessTree(label=tree.label)
    return ProcessTree(OPS[tree.operator.value], None, tuple(from_pm4py(c)
                                                             for c in tree.children))


def to_pm4py(tree: ProcessTree, parent=None):
    from pm4py.objects.process_tree.obj import Operator
    from pm4py.objects.process_tree.obj import ProcessTree as PmTree

    symbols = {v: k for k, v in OPS.items()}
    if tree.is_leaf:
        return PmTree(label=tree.label, parent=parent)
    node = PmTree(operator=Operator(symbols[tree.operator]), parent=parent)
    node.children.extend(to_pm4py(c, node) for c in tree.children)
    return node


def pm4py_imd(arcs: dict, starts: dict, ends: dict) -> ProcessTree:
    """pm4py's IMd (``inductive_miner.apply(dfg, variant=Variants.IMd)``) on a DFG object."""
    _pm4py()
    from pm4py.algo.discovery.inductive import algorithm as inductive_miner
    from pm4py.objects.dfg.obj import DFG

    dfg = DFG()
    dfg.graph.update(arcs)
    dfg.start_activities.update(starts)
    dfg.end_activities.update(ends)
    return from_pm4py(inductive_miner.apply(dfg, variant=inductive_miner.Variants.IMd))


def dfg_of_traces(traces) -> tuple[dict, dict, dict]:
    arcs, starts, ends = Counter(), Counter(), Counter()
    for t in traces:
        starts[t[0]] += 1
        ends[t[-1]] += 1
        arcs.update(zip(t, t[1:], strict=False))
    return dict(arcs), dict(starts), dict(ends)


def fitting(traces, net, im, fm) -> set[tuple[str, ...]]:
    """The traces an alignment replays without a log or model move."""
    _pm4py()
    from pm4py.algo.conformance.alignments.petri_net import algorithm as alignments
    from pm4py.objects.log.obj import Event, EventLog, Trace

    log = EventLog([Trace([Event({"concept:name": a}) for a in t]) for t in traces])
    results = alignments.apply(log, net, im, fm, parameters={"show_progress_bar": False})
    return {tuple(t) for t, r in zip(traces, results, strict=True) if r["fitness"] == 1.0}


def pm4py_net_of(tree: ProcessTree, tmp_path: Path):
    """Our net of ``tree``, written as PNML and opened by pm4py."""
    path = tmp_path / "model.pnml"
    petri.write_pnml(petri.from_process_tree(tree), path)
    return _pm4py().read_pnml(str(path))


@pytest.fixture(scope="module")
def fixture_logs(fixtures_dir):
    return {name: pm4py_oracle.load(fixtures_dir / "process" / name) for name in FIXTURE_LOGS}


def mined(log) -> tuple[ProcessTree, ProcessTree]:
    """(ours, pm4py's) IMd tree of a log's DFG, both normalised."""
    arcs, starts, ends = (dict(x) for x in _pm4py().discover_dfg(log))
    ours = inductive_miner_dfg(Dfg(arcs, starts, ends))
    return ours.normalised(), pm4py_imd(arcs, starts, ends).normalised()


# --- the tree and its notation ---------------------------------------------------------------

def test_to_string_is_pm4py_notation():
    tree = T("->", "a", T("X", "b", "c"), T("*", "d", None))
    assert tree.to_string() == "->( 'a', X( 'b', 'c' ), *( 'd', tau ) )"
    assert str(to_pm4py(tree)) == tree.to_string()
    assert A("a").to_string() == str(to_pm4py(A("a"))) == "a"
    assert A(None).to_string() == "tau"


def test_normalised_sorts_only_commutative_children():
    assert T("X", "b", "a").normalised() == T("X", "a", "b")
    assert T("+", T("->", "c", "d"), "a").normalised() \
        == T("+", "a", T("->", "c", "d")).normalised()
    assert T("->", "b", "a").normalised() == T("->", "b", "a")
    assert T("*", "b", "a").normalised() != T("*", "a", "b").normalised()


def test_tree_rejects_malformed_nodes():
    with pytest.raises(ValueError, match="unknown operator"):
        ProcessTree("or", None, (A("a"),))
    with pytest.raises(ValueError, match="a leaf has no children"):
        ProcessTree(None, "a", (A("b"),))


@pytest.mark.parametrize("raw, want", [
    (T("->", "a", T("->", "b", None), None), T("->", "a", "b")),
    (T("X", None, T("X", None, "a"), "b"), T("X", None, "a", "b")),
    (T("+", T("+", "a", "b"), "c"), T("+", "a", "b", "c")),
    (T("*", None, None), A(None)),
    (T("->", None, None), A(None)),
    (T("*", T("*", "a", "b"), "c"), T("*", T("*", "a", "b"), "c")),
    (T("X", T("->", None, "a")), A("a")),
])
def test_simplify_keeps_the_language(raw, want):
    assert simplify(raw) == want


# --- each cut on a tiny DFG, worked by hand --------------------------------------------------

HAND = {
    "xor": ([["a", "b"], ["c", "d"]], T("X", T("->", "a", "b"), T("->", "c", "d"))),
    # a -> c jumps b: b becomes skippable
    "sequence": ([["a", "b", "c"], ["a", "c"]], T("->", "a", T("X", None, "b"), "c")),
    # a chain: one group per activity, nothing skippable
    "sequence_chain": ([["a", "b", "c", "d"]], T("->", "a", "b", "c", "d")),
    "parallel": ([["a", "b"], ["b", "a"]], T("+", "a", "b")),
    "parallel_with_sequence": ([["a", "b", "c"], ["b", "a", "c"]],
                               T("->", T("+", "a", "b"), "c")),
    "loop": ([["a"], ["a", "b", "a"]], T("*", "a", "b")),
    # do {a}, redo {b}; the end a directly before the start a makes the redo part skippable,
    # and each part's self-loop leaves it no cut but the flower
    "loop_skippable_redo": ([["a", "a", "b", "b", "a"]],
                            T("*", T("*", None, "a"), T("X", None, T("*", None, "b")))),
    "flower_self_loop": ([["a", "a"]], T("*", None, "a")),
    "single": ([["a"]], A("a")),
}


@pytest.mark.parametrize("case", sorted(HAND))
def test_hand_worked_cuts(case):
    traces, want = HAND[case]
    arcs, starts, ends = dfg_of_traces(traces)
    got = inductive_miner_dfg(arcs, starts, ends)
    assert got.normalised() == want.normalised()
    assert pm4py_imd(arcs, starts, ends).normalised() == want.normalised()


def test_flower_when_no_cut_exists():
    # every pair follows both ways but only a starts and ends: no cut, every activity in a loop
    arcs = {(x, y): 1 for x in "abc" for y in "abc" if x != y}
    tree = inductive_miner_dfg(arcs, {"a": 1}, {"b": 1})
    assert tree == T("*", None, T("X", "a", "b", "c"))
    assert pm4py_imd(arcs, {"a": 1}, {"b": 1}).normalised() == tree.normalised()


def test_empty_dfg_is_tau_and_inputs_are_checked():
    assert inductive_miner_dfg({}, {}, {}) == A(None)
    with pytest.raises(ValueError, match="positive integers"):
        inductive_miner_dfg({("a", "b"): 0}, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match=r"activities not in the DFG.*\['z'\]"):
        inductive_miner_dfg({("a", "b"): 1}, {"a": 1}, {"b": 1}, activities=["a", "b", "z"])
    with pytest.raises(ValueError, match="needs start and end"):
        inductive_miner_dfg({("a", "b"): 1}, {}, {"b": 1})


def test_dfg_from_the_library_frames():
    import pandas as pd

    dfg = Dfg.from_frames(pd.DataFrame({"source": ["a"], "target": ["b"], "frequency": [3]}),
                          pd.DataFrame({"activity": ["a"], "cases": [3]}),
                          [{"activity": "b", "cases": 3}])
    assert dfg == Dfg({("a", "b"): 3}, {"a": 3}, {"b": 3})
    assert dfg.activities == {"a", "b"}


@pytest.mark.parametrize("seed", range(40))
def test_random_logs_equal_pm4py(seed):
    """Random logs (mostly fall-throughs and nested cuts) over up to eight activities."""
    rng = random.Random(seed)
    acts = "abcdefgh"[: rng.randint(2, 8)]
    traces = [[rng.choice(acts) for _ in range(rng.randint(1, 7))]
              for _ in range(rng.randint(1, 10))]
    arcs, starts, ends = dfg_of_traces(traces)
    try:
        want = pm4py_imd(arcs, starts, ends)
    except IndexError:  # pm4py fails on a projected DFG with no start activity
        pytest.skip("pm4py cannot mine this DFG")
    assert inductive_miner_dfg(arcs, starts, ends).normalised() == want.normalised()


@pytest.mark.parametrize("seed", range(25))
def test_played_out_trees_equal_pm4py(seed):
    """Logs played out from random block-structured models, so every cut type occurs."""
    _pm4py()
    from pm4py.algo.simulation.playout.process_tree import algorithm as playout
    from pm4py.algo.simulation.tree_generator import algorithm as generator

    random.seed(seed)
    model = generator.apply(parameters={"min": 4, "mode": 8, "max": 12, "loop": 0.2,
                                        "silent": 0.1, "or": 0.0, "choice": 0.3,
                                        "parallel": 0.25, "sequence": 0.35})
    log = playout.apply(model, parameters={"num_traces": 60})
    traces = [[e["concept:name"] for e in t] for t in log]
    arcs, starts, ends = dfg_of_traces([t for t in traces if t])
    assert inductive_miner_dfg(arcs, starts, ends).normalised() \
        == pm4py_imd(arcs, starts, ends).normalised()


# --- the reference logs ---------------------------------------------------------------------

def test_running_example_tree(fixture_logs):
    ours, want = mined(fixture_logs["running-example.xes"])
    assert ours == want
    assert ours == T("->", "register request",
                     T("*", T("->", T("+", "check ticket",
                                      T("X", "examine casually", "examine thoroughly")),
                              "decide"), "reinitiate request"),
                     T("X", "pay compensation", "reject request")).normalised()


def test_roadtraffic_fixture_tree(fixture_logs):
    ours, want = mined(fixture_logs["roadtraffic_1t_per_variant.xes.gz"])
    assert ours == want
    assert ours.operator == "seq" and ours.children[0] == A("Create Fine")


@pytest.mark.parametrize("name", SHARED_LOGS)
def test_shared_reference_logs(shared_data, name):
    path = shared_data / "process_mining" / "event_logs" / "pm4py" / name
    ours, want = mined(pm4py_oracle.load(path))
    assert ours == want


def test_log_based_imd_agrees_on_the_running_example(fixture_logs):
    """pm4py's IMd on the log itself (not a DFG object) gives the same tree."""
    _pm4py()
    from pm4py.algo.discovery.inductive import algorithm as inductive_miner

    log = fixture_logs["running-example.xes"]
    want = from_pm4py(inductive_miner.apply(log, variant=inductive_miner.Variants.IMd))
    assert mined(log)[0] == want.normalised()


@pytest.mark.parametrize("name", FIXTURE_LOGS)
def test_discover_process_tree_on_spark(spark, fixture_logs, name):
    _pm4py()
    from pm4py.algo.discovery.inductive import algorithm as inductive_miner

    pdf = fixture_logs[name]
    df = spark.createDataFrame(pdf[list(KEYS.values())].astype({"case:concept:name": str}))
    tree = discover_process_tree(df, **KEYS)
    want = from_pm4py(inductive_miner.apply(pdf, variant=inductive_miner.Variants.IMd))
    assert tree.normalised() == want.normalised()
    assert tree.activities() == set(pdf["concept:name"])


# --- the Petri net --------------------------------------------------------------------------

def test_net_of_a_tree_has_the_expected_shape():
    net = petri.from_process_tree(T("->", "a", T("+", "b", "c"), T("*", "d", None)))
    net.validate()
    assert net.initial_marking == {"source": 1} and net.final_marking == {"sink": 1}
    assert sorted(t.label for t in net.transitions if not t.silent) == ["a", "b", "c", "d"]
    # split and join of +, enter and leave of *, and the tau redo
    assert sum(t.silent for t in net.transitions) == 5
    a = next(t.id for t in net.transitions if t.label == "a")
    assert net.preset(a) == {"source": 1}


LANGUAGE_TREES = [
    T("->", "a", T("X", "b", "c"), T("*", "d", None)),
    T("+", "a", T("*", "b", None), T("X", None, "c")),
    T("*", T("->", "a", "b"), T("X", "c", None)),
    T("X", T("->", "a", T("+", "b", "c")), None),
]


@pytest.mark.parametrize("tree", LANGUAGE_TREES, ids=str)
def test_net_language_equals_pm4py_net(tree, tmp_path):
    """Every sequence over the activities up to length 4: our net replays exactly those that
    pm4py's net of the same tree replays."""
    pm4py = _pm4py()
    acts = sorted(tree.activities())
    probes = [list(p) for n in range(5) for p in itertools.product(acts, repeat=n)]
    want = fitting(probes, *pm4py.convert_to_petri_net(to_pm4py(tree)))
    got = fitting(probes, *pm4py_net_of(tree, tmp_path))
    assert want and len(want) < len(probes)
    assert got == want


def test_running_example_net_fits_the_log(fixture_logs, tmp_path):
    """IM guarantees fitness 1 on the running example; mutated traces fit exactly when they
    fit pm4py's net of pm4py's tree."""
    pm4py = _pm4py()
    log = fixture_logs["running-example.xes"]
    tree, _ = mined(log)
    net, im, fm = pm4py_net_of(tree, tmp_path)
    fit = pm4py.fitness_token_based_replay(log, net, im, fm)
    assert fit["log_fitness"] == 1.0 and fit["perc_fit_traces"] == 100.0
    variants = [list(v) for v in pm4py.get_variants(log)]
    probes = [*variants]
    for v in variants:
        for i in range(len(v) - 1):
            probes.append(v[:i] + [v[i + 1], v[i]] + v[i + 2:])
            probes.append(v[:i] + v[i + 1:])
    ref = pm4py.discover_process_tree_inductive(pm4py.discover_dfg_typed(log))
    want = fitting(probes, *pm4py.convert_to_petri_net(ref))
    got = fitting(probes, net, im, fm)
    assert {tuple(v) for v in variants} <= got
    assert got == want and len(got) < len(probes)


def test_roadtraffic_net_fits_by_token_replay(fixture_logs, tmp_path):
    pm4py = _pm4py()
    log = fixture_logs["roadtraffic_1t_per_variant.xes.gz"]
    net, im, fm = pm4py_net_of(mined(log)[0], tmp_path)
    assert pm4py.fitness_token_based_replay(log, net, im, fm)["log_fitness"] == 1.0


# --- PNML -----------------------------------------------------------------------------------

def test_pnml_round_trip_ours_and_pm4py(fixture_logs, tmp_path):
    tree, _ = mined(fixture_logs["running-example.xes"])
    net = petri.from_process_tree(tree, name="running_example")
    path = tmp_path / "net.pnml"
    petri.write_pnml(net, path)
    assert petri.read_pnml(path) == net
    pm_net, im, fm = _pm4py().read_pnml(str(path))
    assert {p.name for p in pm_net.places} == set(net.places)
    assert {(t.name, t.label) for t in pm_net.transitions} \
        == {(t.id, t.label) for t in net.transitions}
    assert {(a.source.name, a.target.name) for a in pm_net.arcs} \
        == {(a.source, a.target) for a in net.arcs}
    assert {p.name: n for p, n in im.items()} == net.initial_marking
    assert {p.name: n for p, n in fm.items()} == net.final_marking


def test_write_pnml_to_open_files():
    net = petri.from_process_tree(T("->", "a", None, "b"))
    binary, text = io.BytesIO(), io.StringIO()
    petri.write_pnml(net, binary)
    petri.write_pnml(net, text)
    assert binary.getvalue().decode("utf-8") == text.getvalue()
    binary.seek(0)
    assert petri.read_pnml(binary) == net


def test_read_pnml_written_by_pm4py(tmp_path):
    pm4py = _pm4py()
    tree = T("->", "a", T("+", "b", "c"), T("X", "d", None))
    path = tmp_path / "pm4py.pnml"
    pm4py.write_pnml(*pm4py.convert_to_petri_net(to_pm4py(tree)), str(path))
    net = petri.read_pnml(path)
    assert net.labels == {"a", "b", "c", "d"}
    pm_net = pm4py.read_pnml(str(path))[0]
    assert sum(t.silent for t in net.transitions) \
        == sum(t.label is None for t in pm_net.transitions) > 0
    assert sum(net.initial_marking.values()) == 1 and sum(net.final_marking.values()) == 1
    probes = [list(p) for n in range(5) for p in itertools.product("abcd", repeat=n)]
    petri.write_pnml(net, tmp_path / "again.pnml")
    again = pm4py.read_pnml(str(tmp_path / "again.pnml"))
    assert fitting(probes, *again) == fitting(probes, *pm4py.read_pnml(str(path)))


def test_read_standard_pnml_with_namespace_and_no_final_marking(tmp_path):
    path = tmp_path / "std.pnml"
    path.write_text(
        '<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">'
        '<net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="pg">'
        '<place id="i"><initialMarking><text>2</text></initialMarking></place>'
        '<place id="o"/><transition id="t"><name><text>go</text></name></transition>'
        '<transition id="u"/>'
        '<arc id="a1" source="i" target="t"><inscription><text>2</text></inscription></arc>'
        '<arc id="a2" source="t" target="o"/></page></net></pnml>')
    net = petri.read_pnml(path)
    assert net.initial_marking == {"i": 2} and net.final_marking == {"o": 1}
    assert net.transitions == [petri.Transition("t", "go"), petri.Transition("u", "u")]
    assert net.preset("t") == {"i": 2}


@pytest.mark.parametrize("body, message", [
    ("<pnml><net id='n'><place id='p'>", "not well-formed XML"),
    ("<petri/>", "root element is <petri>"),
    ("<pnml/>", "0 <net> elements"),
    ("<pnml><net><place/></net></pnml>", "a <place> has no id"),
    ("<pnml><net><place id='p'><initialMarking><text>x</text></initialMarking></place>"
     "</net></pnml>", "initial marking 'x' is not a whole number"),
    ("<pnml><net><place id='p'/><arc id='a' source='p'/></net></pnml>",
     "arc 'a' needs a source and a target"),
    ("<pnml><net><place id='p'/><place id='q'/><arc id='a' source='p' target='q'/></net>"
     "</pnml>", "must join a place and a transition"),
    ("<pnml><net><place id='p'/><finalmarkings><marking><place idref='z'><text>1</text>"
     "</place></marking></finalmarkings></net></pnml>", r"names unknown places \['z'\]"),
])
def test_read_pnml_errors_name_the_problem(tmp_path, body, message):
    path = tmp_path / "bad.pnml"
    path.write_text(body)
    with pytest.raises(petri.PnmlError, match=message) as err:
        petri.read_pnml(path)
    assert str(path) in str(err.value)


def test_read_pnml_missing_file(tmp_path):
    with pytest.raises(petri.PnmlError, match="cannot be read"):
        petri.read_pnml(tmp_path / "absent.pnml")


# --- drawing --------------------------------------------------------------------------------

def test_dot_text_shows_tokens_labels_and_silent_steps():
    net = petri.from_process_tree(T("->", 'say "hi"', T("X", "b", None)))
    dot = petri.to_dot(net)
    assert '"p:source" [shape=circle, label="\u25cf"' in dot
    assert '"p:sink" [shape=doublecircle' in dot
    assert 'label="say \\"hi\\""' in dot
    assert dot.count("fillcolor=black") == 1
    assert dot.count("->") == len(net.arcs)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_svg_renders_every_activity(fixture_logs):
    tree, _ = mined(fixture_logs["running-example.xes"])
    svg = petri.to_svg(petri.from_process_tree(tree))
    assert svg.lstrip().startswith(("<svg", "<?xml"))
    for label in tree.activities():
        assert html.escape(label, quote=False) in svg


def test_svg_without_graphviz_raises_render_error(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RenderError, match="Graphviz 'dot' is not installed"):
        petri.to_svg(petri.from_process_tree(A("a")))
