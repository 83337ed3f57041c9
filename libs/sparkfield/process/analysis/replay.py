"""Token-based replay of event logs on a Petri net: conformance of every case, computed by the
executors.

A trace is replayed by firing, for each event, a transition labelled with its activity. A
transition that is not enabled is first enabled, when possible, through silent transitions
(the shortest silent paths from the marked places to the places it lacks); tokens still missing
are then created and counted. After the last event the replay walks silent paths towards the
final marking. The counts give the trace fitness::

    0.5 * (1 - missing / consumed) + 0.5 * (1 - remaining / produced)

This is the replay of pm4py's ``TOKEN_REPLAY`` variant with the defaults of
``pm4py.conformance_diagnostics_token_based_replay``: remaining tokens count against fitness,
events whose activity no transition carries are skipped (they neither fit nor break a trace),
the final marking is sought through silent transitions, and the search for silent transitions
that enable a visible one goes two levels deep, as pm4py's does. Where pm4py's choice depends on
the iteration order of Python sets (several enabled transitions with the same label, silent
paths of equal length between the same places), the order of the net's transitions and arcs
decides here.

Each event's outcome depends only on the marking it meets, so a :class:`TokenReplayer` learns
the replay as a state machine while it replays: a marking it has met gets a number, and what an
activity does there (the marking it leads to, the tokens it creates, consumes and produces) is
worked out once and looked up afterwards, as is the walk to the final marking from a marking.
The table is bounded (:data:`MAX_STATES`); when it is full it starts again.

On Spark, each case's activities are gathered in event order, the cases are grouped by
variant, and each distinct variant is replayed in ``mapInArrow`` (the net is small and travels
inside the function). Per case, a variant's row carries its case ids, which are exploded back
to one row per case after the replay: the cases are aggregated once and never joined. A caller
that has already counted the variants and keeps a per-case table (the jobs' views) replays the
counted variants (:func:`replay_counted_variants`) and joins their figures to its cases by the
variant (:func:`replayed_cases`), without reading every case's events again.

Why one module: the replay of one variant (tokens, invisible transitions, counts) and its
distribution over the executors share one compiled form of the net."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkfield.core.workers import in_worker
from sparkfield.process.analysis.discover import event_frame
from sparkfield.process.analysis.petri import PetriNet
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, ORDER, TIMESTAMP

__all__ = ["TokenReplayer", "TraceReplay", "log_fitness", "non_fitting_variants",
           "replay_case_table", "replay_case_variants", "replay_cases", "replay_counted_variants",
           "replay_trace", "replay_variants", "replayed_cases"]

# pm4py's limits: silent paths of at most 51 transitions, two levels of recursive enabling,
# five rounds of walking towards the final marking (twice: by all final places, by the sink)
MAX_SILENT_PATH = 51
MAX_ENABLE_DEPTH = 2
FINAL_ROUNDS = 5
# markings a replayer remembers (with what each activity does there) before it starts again
MAX_STATES = 50_000

Marking = dict[str, int]
# what an activity does in a marking: the next state, tokens created, consumed and produced,
# the transitions fired
Step = tuple[int, int, int, int, tuple[int, ...]]
# the walk to the final marking from a state: missing final tokens, remaining tokens, tokens
# consumed and produced, the transitions fired, the marking reached (its items, in order)
End = tuple[int, int, int, int, tuple[int, ...], tuple[tuple[str, int], ...]]


@dataclass(frozen=True)
class TraceReplay:
    """The outcome of replaying one trace: token counts, fitness and what fired."""

    fitness: float
    is_fit: bool
    missing: int
    remaining: int
    produced: int
    consumed: int
    activated: tuple[str, ...]
    reached_marking: dict[str, int]


class TokenReplayer:
    """A net prepared once for replaying many traces: presets and postsets as tuples, the
    transitions per label, the shortest silent paths between every pair of places, and the
    markings met so far with what each activity does there.

    A marking is a state as the ordered items of its dict (the order of places can decide
    between silent paths of equal length), so a looked-up step is exactly the step the token
    game would play."""

    def __init__(self, net: PetriNet) -> None:
        net.validate()
        self.ids = [t.id for t in net.transitions]
        self.pre = [tuple(net.preset(t.id).items()) for t in net.transitions]
        self.post = [tuple(net.postset(t.id).items()) for t in net.transitions]
        self.pre_sum = [sum(w for _, w in arcs) for arcs in self.pre]
        self.post_sum = [sum(w for _, w in arcs) for arcs in self.post]
        self.rank = {p: i for i, p in enumerate(sorted(net.places))}
        self.initial = {p: n for p, n in net.initial_marking.items() if n > 0}
        self.final = {p: n for p, n in net.final_marking.items() if n > 0}
        self.by_label = _transitions_by_label(net)
        self.fallback = _last_by_id(net)
        self.paths = _silent_paths(net, self.post)
        self.base_consumed = sum(self.final.values())
        self.base_produced = sum(self.initial.values())
        self._forget()

    # --- the learnt state machine -----------------------------------------------------------

    def _forget(self) -> None:
        self._ids: dict[tuple[tuple[str, int], ...], int] = {}
        self._markings: list[tuple[tuple[str, int], ...]] = []
        self._steps: list[dict[str, Step]] = []
        self._ends: list[End | None] = []
        self._state(tuple(self.initial.items()))  # state 0

    def _state(self, marking: tuple[tuple[str, int], ...]) -> int:
        s = self._ids.get(marking)
        if s is None:
            s = self._ids[marking] = len(self._markings)
            self._markings.append(marking)
            self._steps.append({})
            self._ends.append(None)
        return s

    def _learn(self, s: int, activity: str) -> Step:
        """What ``activity`` does in state ``s``, played once and remembered."""
        if activity not in self.fallback:  # no transition carries it: skipped
            step: Step = (s, 0, 0, 0, ())
        else:
            m = dict(self._markings[s])
            fired: list[int] = []
            created = self._event(activity, m, fired)
            step = (self._state(tuple(m.items())), created,
                    sum(self.pre_sum[t] for t in fired), sum(self.post_sum[t] for t in fired),
                    tuple(fired))
        self._steps[s][activity] = step
        return step

    def _end(self, s: int) -> End:
        """The walk towards the final marking from state ``s``, played once and remembered."""
        end = self._ends[s]
        if end is None:
            m = dict(self._markings[s])
            fired: list[int] = []
            self._towards_final(m, fired)
            gap = sum(max(0, n - m.get(p, 0)) for p, n in self.final.items())
            remaining = sum(max(0, n - self.final[p]) if p in self.final else n
                            for p, n in m.items())
            end = self._ends[s] = (gap, remaining, sum(self.pre_sum[t] for t in fired),
                                   sum(self.post_sum[t] for t in fired), tuple(fired),
                                   tuple(m.items()))
        return end

    def _play(self, trace: Iterable[str], fired: list[int] | None
              ) -> tuple[int, int, int, End]:
        """Tokens created, consumed and produced by the events of ``trace``, and the walk to
        the final marking after them; the transitions fired are added to ``fired``."""
        if len(self._markings) >= MAX_STATES:
            self._forget()
        steps = self._steps
        s = created = consumed = produced = 0
        for activity in trace:
            step = steps[s].get(activity)
            if step is None:
                step = self._learn(s, activity)
            s, c, cons, prod, f = step
            created += c
            consumed += cons
            produced += prod
            if fired is not None:
                fired.extend(f)
        end = self._end(s)
        if fired is not None:
            fired.extend(end[4])
        return created, consumed + end[2], produced + end[3], end

    def counts(self, trace: Iterable[str]) -> tuple[float, bool, int, int, int, int]:
        """fitness, is_fit, missing, remaining, produced, consumed of one trace (what
        :meth:`replay` gives, without the transitions fired and the marking reached)."""
        created, consumed, produced, end = self._play(trace, None)
        return _figures(created, end[0], end[1], consumed + self.base_consumed,
                        produced + self.base_produced)

    # --- the token game ---------------------------------------------------------------------

    def enabled(self, t: int, m: Marking) -> bool:
        return all(m.get(p, 0) >= w for p, w in self.pre[t])

    def fire(self, t: int, m: Marking) -> None:
        """Fire ``t`` in place; places left empty leave the marking (as in pm4py)."""
        for p, w in self.pre[t]:
            left = m[p] - w
            if left:
                m[p] = left
            else:
                del m[p]
        for p, w in self.post[t]:
            m[p] = m.get(p, 0) + w

    # --- one trace --------------------------------------------------------------------------

    def replay(self, trace: Iterable[str]) -> TraceReplay:
        """Replay the activities of one trace from the initial marking."""
        fired: list[int] = []
        created, consumed, produced, end = self._play(trace, fired)
        fitness, is_fit, missing, remaining, produced, consumed = _figures(
            created, end[0], end[1], consumed + self.base_consumed,
            produced + self.base_produced)
        return TraceReplay(fitness, is_fit, missing, remaining, produced, consumed,
                           tuple(self.ids[t] for t in fired), dict(end[5]))

    def _event(self, activity: str, m: Marking, fired: list[int]) -> int:
        """Fire a transition of ``activity`` (through silent ones, else with created tokens);
        the tokens created."""
        ready = [t for t in self.by_label[activity] if self.enabled(t, m)]
        t = ready[0] if ready else self.fallback[activity]
        if not self.enabled(t, m):
            self._enable(t, m, fired, set(), 0)
        created = 0
        if not self.enabled(t, m):
            for p, w in self.pre[t]:
                have = m.get(p, 0)
                if have < w:  # pm4py adds the arc weight, not the deficit
                    created += w - have
                    m[p] = have + w
        self.fire(t, m)
        fired.append(t)
        return created

    def _paths_to(self, m: Marking, targets: Iterable[str]) -> list[tuple[int, ...]]:
        """Silent paths from every marked place to every target, shortest first (places in
        name order, as pm4py sorts them)."""
        found = []
        ordered = sorted(targets, key=self.rank.__getitem__)
        for source in sorted(m, key=self.rank.__getitem__):
            reach = self.paths.get(source, {})
            found.extend(reach[p] for p in ordered if p in reach)
        found.sort(key=len)
        return found

    def _enable(self, t: int, m: Marking, fired: list[int], visited: set[int],
                depth: int) -> None:
        """Fire silent transitions towards the places ``t`` lacks (pm4py's
        ``apply_hidden_trans``)."""
        if depth >= MAX_ENABLE_DEPTH or t in visited:
            return
        visited.add(t)
        lacking = [p for p, w in self.pre[t] if m.get(p, 0) < w]
        groups = self._paths_to(m, lacking)
        if not groups:
            return
        self._walk(t, m, groups, fired, visited)
        if self.enabled(t, m):
            return
        for group in self._paths_to(m, lacking):
            for t4 in group:
                if t4 == t or t4 in visited:
                    continue
                if not self.enabled(t4, m):
                    self._enable(t4, m, fired, visited, depth + 1)
                if self.enabled(t4, m):
                    self.fire(t4, m)
                    fired.append(t4)
                    visited.add(t4)
        # pm4py then retries ``t`` itself one level deeper, which returns at once: ``t`` is
        # already visited

    def _walk(self, t: int, m: Marking, groups: list[tuple[int, ...]], fired: list[int],
              visited: set[int]) -> None:
        """Round-robin over the paths, firing what is enabled and not yet visited, until ``t``
        is enabled or a round changes nothing (pm4py's ``enable_hidden_transitions``)."""
        cursor = [0] * len(groups)
        z = 0
        while True:
            g = z % len(groups)
            changed = False
            while cursor[g] < len(groups[g]):
                t3 = groups[g][cursor[g]]
                if t3 != t and t3 not in visited and self.enabled(t3, m):
                    self.fire(t3, m)
                    fired.append(t3)
                    visited.add(t3)
                    changed = True
                cursor[g] += 1
                if self.enabled(t, m):
                    break
            if self.enabled(t, m) or not changed:
                return
            z += 1

    def _at_final(self, m: Marking) -> bool:
        return all(p in m for p in self.final)

    def _towards_final(self, m: Marking, fired: list[int]) -> None:
        """After the last event: fire silent paths towards the final places, then (for a
        single final place) along each marked place's path to it."""
        for _ in range(FINAL_ROUNDS):
            if self._at_final(m):
                return
            for group in self._paths_to(m, self.final):
                for t in group:
                    if self.enabled(t, m):
                        self.fire(t, m)
                        fired.append(t)
                if self._at_final(m):
                    break
        if self._at_final(m) or len(self.final) != 1:
            return
        sink = next(iter(self.final))
        routes = sorted((self.paths[p][sink] for p in m
                         if p in self.paths and sink in self.paths[p]), key=len)
        for _ in range(FINAL_ROUNDS):
            for route in routes:
                for t in route:
                    if not self.enabled(t, m):
                        break
                    self.fire(t, m)
                    fired.append(t)


def _figures(created: int, gap: int, remaining: int, consumed: int, produced: int
             ) -> tuple[float, bool, int, int, int, int]:
    """fitness, is_fit, missing, remaining, produced, consumed of a replay that created
    ``created`` tokens for its events and lacked ``gap`` final ones."""
    is_fit = created == 0 and remaining == 0
    missing = created + gap
    fitness = 1.0
    if consumed > 0 and produced > 0:
        fitness = 0.5 * (1 - missing / consumed) + 0.5 * (1 - remaining / produced)
    return fitness, is_fit, missing, remaining, produced, consumed


def _transitions_by_label(net: PetriNet) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, t in enumerate(net.transitions):
        if t.label is not None:
            out.setdefault(t.label, []).append(i)
    return out


def _last_by_id(net: PetriNet) -> dict[str, int]:
    """The transition pm4py falls back on for a label none of whose transitions is enabled:
    the last by id."""
    order = sorted(range(len(net.transitions)), key=lambda i: net.transitions[i].id)
    return {net.transitions[i].label: i for i in order if net.transitions[i].label is not None}


def _silent_paths(net: PetriNet, post: list[tuple]) -> dict[str, dict[str, tuple[int, ...]]]:
    """For every place, a shortest sequence of silent transitions leading to each place it
    reaches that way (breadth-first over silent transitions, at most 51 of them)."""
    silent_out: dict[str, list[int]] = {p: [] for p in net.places}
    for i, t in enumerate(net.transitions):
        if t.silent:
            for p in net.preset(t.id):
                silent_out[p].append(i)
    paths: dict[str, dict[str, tuple[int, ...]]] = {}
    for start in net.places:
        reach: dict[str, tuple[int, ...]] = {}
        queue: deque[tuple[str, tuple[int, ...]]] = deque([(start, ())])
        while queue:
            place, path = queue.popleft()
            if len(path) >= MAX_SILENT_PATH:
                continue
            for t in silent_out[place]:
                for target, _ in post[t]:
                    if target not in reach:
                        reach[target] = path + (t,)
                        queue.append((target, reach[target]))
        paths[start] = reach
    return paths


def replay_trace(net: PetriNet, trace: Sequence[str]) -> TraceReplay:
    """Replay one trace (for many, build a :class:`TokenReplayer` once)."""
    return TokenReplayer(net).replay(trace)


# --- on Spark -------------------------------------------------------------------------------

COUNTS = ["missing", "remaining", "produced", "consumed"]
FIGURES = [T.StructField("fitness", T.DoubleType(), False),
           T.StructField("is_fit", T.BooleanType(), False),
           *[T.StructField(c, T.LongType(), False) for c in COUNTS]]
VARIANT = T.StructField("variant", T.ArrayType(T.StringType()), False)
CASE_COUNT = T.StructField("cases", T.LongType(), False)
CASE_IDS = T.StructField("case_ids", T.ArrayType(T.StringType()), False)
REPLAYED = T.StructType([VARIANT, CASE_COUNT, *FIGURES])
_ARROW = [pa.float64(), pa.bool_(), *[pa.int64()] * len(COUNTS)]


# a variant's case ids are gathered per this many partitions of the per-case table: a row of
# ids never holds more than the cases of 64 partitions, however large the log
CASE_PARTITIONS_PER_ROW = 64


def _replay_batches(replayer: TokenReplayer, keep: Sequence[str]):
    """The ``mapInArrow`` function: batches of variants in, ``keep`` (passed through as they
    are) and the replay's figures out. A variant the task has met is recognised by the codes
    of its activities (one code per distinct activity name), read from Arrow without making
    Python strings, and not replayed again."""
    names = [*keep, *(f.name for f in FIGURES)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: dict[bytes, tuple] = {}
        code: dict[str, int] = {}
        activities: list[str] = []
        counts = replayer.counts
        for batch in batches:
            variants = batch.column("variant")
            encoded = pc.dictionary_encode(pc.list_flatten(variants))
            dictionary = [*encoded.dictionary.to_pylist(), None]  # a null: skipped as unknown
            local = np.empty(len(dictionary), np.int32)
            for i, name in enumerate(dictionary):
                if name not in code:
                    code[name] = len(activities)
                    activities.append(name)
                local[i] = code[name]
            codes = local[pc.fill_null(encoded.indices, len(dictionary) - 1).to_numpy()]
            ends = np.cumsum(pc.fill_null(pc.list_value_length(variants), 0).to_numpy())
            rows, start = [], 0
            for end in ends.tolist():
                trace = codes[start:end]
                key = trace.tobytes()
                row = seen.get(key)
                if row is None:
                    row = seen[key] = counts([activities[c] for c in trace.tolist()])
                rows.append(row)
                start = end
            figures = zip(*rows, strict=True) if rows else ([] for _ in _ARROW)
            yield pa.RecordBatch.from_arrays(
                [*(batch.column(k) for k in keep),
                 *(pa.array(list(col), t) for col, t in zip(figures, _ARROW, strict=True))],
                names=names)

    return run


def _case_variants(df: DataFrame, case_col: str, activity_col: str, timestamp_col: str,
                   order_col: str | None, timezone: str) -> DataFrame:
    """case_id, variant: each case's activities in event order (the order of
    ``case_sequences``: the activity is the last ordering key, so sorting the keys alone
    sorts the events as it does)."""
    events = event_frame(df, case_col, activity_col, timestamp_col, order_col, timezone)
    seq = F.sort_array(F.collect_list(F.struct(*ORDER)))
    return events.groupBy(CASE).agg(seq.alias("seq")).select(
        CASE, F.col(f"seq.{ACTIVITY}").alias("variant"))


def _replay(grouped: DataFrame, net: PetriNet, keep: Sequence[str]) -> DataFrame:
    fields = {f.name: f for f in (VARIANT, CASE_COUNT, CASE_IDS)}
    schema = T.StructType([*(fields[k] for k in keep), *FIGURES])
    run = _replay_batches(TokenReplayer(net), keep)
    return grouped.select("variant", *(k for k in keep if k != "variant")).mapInArrow(
        in_worker(run), schema)


def replay_case_variants(case_variants: DataFrame, net: PetriNet) -> DataFrame:
    """:func:`replay_variants` of a table of ``case_id, variant`` (each case's activities in
    event order, as an array) that a caller already has."""
    grouped = case_variants.groupBy("variant").agg(F.count(F.lit(1)).alias("cases"))
    return _replay(grouped, net, ["variant", "cases"])


def replay_counted_variants(counted: DataFrame, net: PetriNet) -> DataFrame:
    """:func:`replay_variants` of variants already counted: ``variant`` (the activities in
    event order, as an array) and ``cases``, one row per variant."""
    return _replay(counted.select("variant", "cases"), net, ["variant", "cases"])


def replayed_cases(case_table: DataFrame, replayed: DataFrame) -> DataFrame:
    """One row per case of ``case_table`` (``case_id`` and ``variant``, its activities as a
    JSON array, as :func:`sparkfield.process.analysis.views.cases` makes it) with its
    variant's figures in ``replayed`` (:func:`replay_counted_variants`): case_id, fitness,
    is_fit, missing, remaining, produced, consumed. The variants' JSON is joined, so nothing
    is grouped or replayed again; a case whose variant ``replayed`` lacks keeps its row, with
    null figures."""
    figures = replayed.select(F.to_json("variant").alias("_variant"), "fitness", "is_fit",
                              *COUNTS)
    return case_table.join(figures, case_table["variant"] == figures["_variant"], "left") \
        .select(CASE, "fitness", "is_fit", *COUNTS)


def replay_case_table(case_variants: DataFrame, net: PetriNet) -> DataFrame:
    """:func:`replay_cases` of a table of ``case_id, variant`` that a caller already has.

    The cases are grouped by variant (and by groups of :data:`CASE_PARTITIONS_PER_ROW` of
    their partitions), each group's row carrying its case ids; a variant is replayed once per
    task that meets it, and the ids are exploded back to one row per case: no join, and the
    cases are aggregated once."""
    part = F.floor(F.spark_partition_id() / F.lit(CASE_PARTITIONS_PER_ROW))
    grouped = case_variants.groupBy("variant", part.alias("part")).agg(
        F.collect_list(CASE).alias("case_ids"))
    return _replay(grouped, net, ["case_ids"]).select(
        F.explode("case_ids").alias(CASE), "fitness", "is_fit", *COUNTS)


def replay_variants(df: DataFrame, net: PetriNet, case_col: str = CASE,
                    activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                    order_col: str | None = None, timezone: str = "UTC") -> DataFrame:
    """One row per variant: variant (activities), cases, fitness, is_fit, missing, remaining,
    produced, consumed. Columns and ordering of events as in ``discover_dfg``."""
    return replay_case_variants(
        _case_variants(df, case_col, activity_col, timestamp_col, order_col, timezone), net)


def replay_cases(df: DataFrame, net: PetriNet, case_col: str = CASE,
                 activity_col: str = ACTIVITY, timestamp_col: str = TIMESTAMP,
                 order_col: str | None = None, timezone: str = "UTC") -> DataFrame:
    """One row per case: case_id, fitness, is_fit, missing, remaining, produced, consumed.
    Each distinct variant is replayed on the executors, not each case (see
    :func:`replay_case_table`)."""
    return replay_case_table(
        _case_variants(df, case_col, activity_col, timestamp_col, order_col, timezone), net)


def log_fitness(replayed: DataFrame) -> dict[str, float]:
    """pm4py's ``fitness_token_based_replay`` figures of per-case rows (or per-variant rows
    with their ``cases``): log_fitness from the summed token counts, average_trace_fitness,
    percentage_of_fitting_traces (also as perc_fit_traces).

    Runs a Spark job: the figures are Python numbers, summed over ``replayed`` in one
    aggregation."""
    weight = F.col("cases") if "cases" in replayed.columns else F.lit(1)
    row = replayed.select(
        F.sum(weight).alias("n"),
        F.sum(F.when(F.col("is_fit"), weight).otherwise(0)).alias("fit"),
        F.sum(F.col("fitness") * weight).alias("fitness"),
        *[F.sum(F.col(c) * weight).alias(c) for c in COUNTS]).first()
    n, c, p = row["n"] or 0, row["consumed"] or 0, row["produced"] or 0
    if not (n > 0 and c > 0 and p > 0):
        return {"perc_fit_traces": 0.0, "average_trace_fitness": 0.0, "log_fitness": 0.0,
                "percentage_of_fitting_traces": 0.0}
    perc = 100.0 * row["fit"] / n
    return {
        "perc_fit_traces": perc,
        "average_trace_fitness": row["fitness"] / n,
        "log_fitness": 0.5 * (1 - row["missing"] / c) + 0.5 * (1 - row["remaining"] / p),
        "percentage_of_fitting_traces": perc,
    }


def non_fitting_variants(replayed_variants: DataFrame) -> DataFrame:
    """The variants that do not fit: variant, cases, fitness, missing, remaining, most cases
    first."""
    return (replayed_variants.where(~F.col("is_fit"))
            .select("variant", "cases", "fitness", "missing", "remaining")
            .orderBy(F.desc("cases"), F.asc("fitness")))
