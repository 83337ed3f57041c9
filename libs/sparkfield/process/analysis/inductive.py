"""A process tree discovered from the directly-follows graph (DFG) alone, so that discovery
costs as much as the DFG, not the log: the Inductive Miner - directly-follows based (IMd) of
Leemans, Fahland and van der Aalst, "Scalable process discovery and conformance checking"
(Software and Systems Modeling, 2018).

IMd splits the activities of a DFG by the first cut it finds, in this order: an exclusive
choice (connected components of the undirected DFG), a sequence (groups merged by mutual
reachability and mutual unreachability, then by skippable groups), a parallel composition
(components of the inverted graph; every part needs a start and an end activity) and a loop
(a do-part of the start and end activities, redo-parts that leave an end and return to every
start). Each part gets its own projected DFG and is mined again. A DFG with no arcs and one
activity is that activity; an empty one is a silent step (tau); a DFG with no cut becomes a
flower model ``*( tau, X( a, b, ... ) )``. A part that some traces skip entirely becomes
``X( tau, ... )``. The tree is then reduced by rules that keep its language (nested operators
of one kind flattened, needless tau leaves and one-child operators removed).

The cuts, their order and the projections follow the published description as pm4py 2.7
implements it, so the trees equal pm4py's ``inductive_miner.apply(dfg, variant=IMd)`` up to
the order of the children of ``X`` and ``+``.

``discover_process_tree(df, case_col=..., activity_col=..., timestamp_col=...)`` computes the
DFG in Spark, collects it (one row per arc, a few per activity) and mines it on the driver.

Why one module: the cuts of the Inductive Miner and their fall-throughs recurse into one another
over the same DFG structures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from sparkfield.core.practices import cached
from sparkfield.process.analysis import discover as _discover
from sparkfield.process.analysis import views as _views
from sparkfield.process.eventlog.schema import ACTIVITY, CASE, TIMESTAMP

__all__ = ["OPERATORS", "TAU", "Dfg", "ProcessTree", "dfg_of", "discover_process_tree",
           "inductive_miner_dfg", "simplify"]

SEQ, XOR, AND, LOOP = "seq", "xor", "and", "loop"
OPERATORS = (SEQ, XOR, AND, LOOP)
_SYMBOLS = {SEQ: "->", XOR: "X", AND: "+", LOOP: "*"}


@dataclass(frozen=True)
class ProcessTree:
    """A process tree node: an operator with children, an activity leaf, or tau (neither).

    ``loop`` has two children: the do-part, then the redo-part."""

    operator: str | None = None
    label: str | None = None
    children: tuple[ProcessTree, ...] = ()

    def __post_init__(self) -> None:
        if self.operator is not None and self.operator not in OPERATORS:
            raise ValueError(f"unknown operator {self.operator!r}; one of {OPERATORS}")
        if self.operator is None and self.children:
            raise ValueError("a leaf has no children")
        if self.operator is not None and self.label is not None:
            raise ValueError("an operator node has no label")

    @property
    def is_tau(self) -> bool:
        return self.operator is None and self.label is None

    @property
    def is_leaf(self) -> bool:
        return self.operator is None

    def activities(self) -> set[str]:
        """The activity labels of the leaves."""
        if self.is_leaf:
            return set() if self.label is None else {self.label}
        return set().union(*(c.activities() for c in self.children))

    def to_string(self) -> str:
        """pm4py's notation, e.g. ``->( 'a', X( 'b', 'c' ), *( 'd', tau ) )`` (a lone
        activity at the root is written unquoted, as pm4py does)."""
        if self.is_leaf:
            return "tau" if self.label is None else self.label
        return f"{_SYMBOLS[self.operator]}( " + ", ".join(
            f"'{c.label}'" if c.is_leaf and c.label is not None else c.to_string()
            for c in self.children) + " )"

    def normalised(self) -> ProcessTree:
        """The same tree with the children of ``X`` and ``+`` sorted, so trees that differ
        only by the order of those children compare equal."""
        if self.is_leaf:
            return self
        kids = tuple(c.normalised() for c in self.children)
        if self.operator in (XOR, AND):
            kids = tuple(sorted(kids, key=lambda c: c.to_string()))
        return ProcessTree(self.operator, None, kids)

    def __str__(self) -> str:
        return self.to_string()


TAU = ProcessTree()


def _leaf(label: str) -> ProcessTree:
    return ProcessTree(label=label)


@dataclass(frozen=True)
class Dfg:
    """A directly-follows graph: arc and endpoint frequencies (the number of cases)."""

    arcs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    starts: Mapping[str, int] = field(default_factory=dict)
    ends: Mapping[str, int] = field(default_factory=dict)

    @property
    def activities(self) -> set[str]:
        acts = set(self.starts) | set(self.ends)
        for a, b in self.arcs:
            acts.update((a, b))
        return acts

    @property
    def is_empty(self) -> bool:
        return not self.arcs and not self.starts and not self.ends

    @classmethod
    def from_frames(cls, dfg, starts, ends) -> Dfg:
        """From the frames of ``discover_dfg`` (source, target, frequency) and
        ``start_activities`` / ``end_activities`` (activity, cases), pandas or rows."""
        return cls(_pairs(dfg, ("source", "target"), "frequency"),
                   _pairs(starts, ("activity",), "cases"),
                   _pairs(ends, ("activity",), "cases"))

    def restricted(self, group: set[str]) -> Dfg:
        """The arcs inside ``group`` and its own start and end activities."""
        return Dfg({k: v for k, v in self.arcs.items() if k[0] in group and k[1] in group},
                   {a: n for a, n in self.starts.items() if a in group},
                   {a: n for a, n in self.ends.items() if a in group})


def _records(frame) -> Iterable[Mapping]:
    if hasattr(frame, "to_dict"):
        return frame.to_dict("records")
    return (r.asDict() if hasattr(r, "asDict") else r for r in frame)


def _pairs(frame, keys: tuple[str, ...], value: str) -> dict:
    out: dict = {}
    for row in _records(frame):
        key = tuple(str(row[k]) for k in keys)
        out[key if len(key) > 1 else key[0]] = int(row[value])
    return out


@dataclass(frozen=True)
class _Part:
    """A DFG to mine, and whether some traces skip it entirely (then the empty trace is part
    of its language)."""

    dfg: Dfg
    skip: bool = False


def inductive_miner_dfg(dfg: Dfg | Mapping[tuple[str, str], int],
                        starts: Mapping[str, int] | None = None,
                        ends: Mapping[str, int] | None = None,
                        activities: Iterable[str] | None = None) -> ProcessTree:
    """IMd on a DFG: a :class:`Dfg`, or the arcs with the start and end activities.

    ``activities``, when given, are checked against the DFG: each must occur in it (as it does
    in any DFG of a log), since IMd sees only arcs and endpoints."""
    graph = dfg if isinstance(dfg, Dfg) else Dfg(dict(dfg), dict(starts or {}),
                                                  dict(ends or {}))
    _check(graph, activities)
    return simplify(_mine(_Part(graph)))


def _check(dfg: Dfg, activities: Iterable[str] | None) -> None:
    bad = [f"{k}={v}" for k, v in [*dfg.arcs.items(), *dfg.starts.items(), *dfg.ends.items()]
           if not isinstance(v, int) or v < 1]
    if bad:
        raise ValueError(f"frequencies must be positive integers: {', '.join(bad[:5])}")
    missing = sorted(set(activities or ()) - dfg.activities)
    if missing:
        raise ValueError(f"activities not in the DFG (no arc, not a start or end): {missing}")
    if dfg.arcs and (not dfg.starts or not dfg.ends):
        raise ValueError("a DFG with arcs needs start and end activities")


def _mine(part: _Part) -> ProcessTree:
    dfg = part.dfg
    if part.skip:
        return TAU if dfg.is_empty else ProcessTree(XOR, None, (TAU, _mine(_Part(dfg))))
    base = _base_case(dfg)
    if base is not None:
        return base
    for find in (_xor_cut, _sequence_cut, _parallel_cut, _loop_cut):
        found = find(dfg)
        if found is not None:
            operator, parts = found
            return ProcessTree(operator, None, tuple(_mine(p) for p in parts))
    return _flower(dfg)


def _base_case(dfg: Dfg) -> ProcessTree | None:
    if dfg.is_empty:
        return TAU
    ends = set(dfg.starts) | set(dfg.ends)
    if not dfg.arcs and len(ends) == 1:
        return _leaf(next(iter(ends)))
    return None


def _flower(dfg: Dfg) -> ProcessTree:
    """Every activity, any number of times in any order (the last resort)."""
    redo = Dfg({}, dict.fromkeys(dfg.activities, 1), dict.fromkeys(dfg.activities, 1))
    return ProcessTree(LOOP, None, (TAU, _mine(_Part(redo))))


# --- graph helpers -------------------------------------------------------------------------

def _components(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[set[str]]:
    """Connected components of the undirected graph (union-find)."""
    parent = {n: n for n in nodes}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[rb] = ra
    groups: dict[str, set[str]] = {}
    for n in parent:
        groups.setdefault(root(n), set()).add(n)
    return list(groups.values())


def _successors(dfg: Dfg) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {a: set() for a in dfg.activities}
    for a, b in dfg.arcs:
        out[a].add(b)
    return out


def _reachable(dfg: Dfg) -> dict[str, set[str]]:
    """For each activity, the others reachable from it by one or more arcs."""
    succ = _successors(dfg)
    reach: dict[str, set[str]] = {}
    for start in succ:
        seen: set[str] = set()
        todo = list(succ[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(succ[n])
        seen.discard(start)
        reach[start] = seen
    return reach


# --- exclusive choice ----------------------------------------------------------------------

def _xor_cut(dfg: Dfg) -> tuple[str, list[_Part]] | None:
    groups = _components(dfg.activities, dfg.arcs)
    if len(groups) < 2:
        return None
    groups.sort(key=lambda g: sorted(g))
    return XOR, [_Part(dfg.restricted(g)) for g in groups]


# --- sequence ------------------------------------------------------------------------------

def _sequence_groups(dfg: Dfg) -> list[set[str]]:
    """Activities that reach each other, or neither reaches the other, share a group; the
    groups are ordered by reachability."""
    acts = sorted(dfg.activities)
    reach = _reachable(dfg)
    related = [(a, b) for i, a in enumerate(acts) for b in acts[i + 1:]
               if (b in reach[a]) == (a in reach[b])]
    groups = _components(acts, related)
    before = {a: 0 for a in acts}
    for a in acts:
        for b in reach[a]:
            before[b] += 1
    n = len(acts)
    return sorted(groups, key=lambda g: before[min(g)] + n - len(reach[min(g)]))


def _skippable(p: int, dfg: Dfg, groups: list[set[str]]) -> bool:
    """Whether traces can pass group ``p`` by: an arc over it, a start after it or an end
    before it."""
    before = set().union(*groups[:p])
    after = set().union(*groups[p + 1:])
    return (any(a in before and b in after for a, b in dfg.arcs)
            or any(a in after for a in dfg.starts) or any(a in before for a in dfg.ends))


def _sequence_cut(dfg: Dfg) -> tuple[str, list[_Part]] | None:
    groups = _sequence_groups(dfg)
    if len(groups) < 2:
        return None
    groups = _merge_skippable(dfg, groups)
    if len(groups) < 2:
        return None
    return SEQ, _project_sequence(dfg, groups)


def _merge_skippable(dfg: Dfg, groups: list[set[str]]) -> list[set[str]]:
    """The strict sequence cut: a skippable group absorbs its neighbours that can only be
    skipped together with it (no arc beyond it, no start or end of their own)."""
    big = len(groups) + 1
    index = {a: i for i, g in enumerate(groups) for a in g}
    first_from = [-big if g & set(dfg.starts) else big for g in groups]
    last_to = [big if g & set(dfg.ends) else -big for g in groups]
    for a, b in dfg.arcs:
        first_from[index[b]] = min(first_from[index[b]], index[a])
        last_to[index[a]] = max(last_to[index[a]], index[b])
    groups = [set(g) for g in groups]
    for p in range(len(groups)):
        if not _skippable(p, dfg, groups):
            continue
        q = p - 1
        while q >= 0 and last_to[q] <= p:
            groups[p] |= groups[q]
            groups[q] = set()
            q -= 1
        q = p + 1
        while q < len(groups) and first_from[q] >= p:
            groups[p] |= groups[q]
            groups[q] = set()
            q += 1
    return [g for g in groups if g]


def _project_sequence(dfg: Dfg, groups: list[set[str]]) -> list[_Part]:
    """Each group's DFG: its own arcs; its starts are entered from the previous group (the
    first keeps the log's starts), its ends lead to the next (the last keeps the log's ends).
    A group is skippable when a start lies after it, an end before it or an arc jumps it."""
    last = len(groups) - 1
    index = {a: i for i, g in enumerate(groups) for a in g}
    skip = [False] * len(groups)
    for a in dfg.starts:
        for j in range(index[a]):
            skip[j] = True
    for a in dfg.ends:
        for j in range(index[a] + 1, last + 1):
            skip[j] = True
    entries: list[dict[str, int]] = [{} for _ in groups]
    exits: list[dict[str, int]] = [{} for _ in groups]
    for (a, b), n in dfg.arcs.items():
        i, j = index[a], index[b]
        if j == i + 1:
            exits[i][a] = exits[i].get(a, 0) + n
            entries[j][b] = entries[j].get(b, 0) + n
        for k in range(i + 1, j):
            skip[k] = True
    entries[0] = {a: n for a, n in dfg.starts.items() if index[a] == 0}
    exits[last] = {a: n for a, n in dfg.ends.items() if index[a] == last}
    parts = []
    for i, g in enumerate(groups):
        arcs = {k: v for k, v in dfg.arcs.items() if k[0] in g and k[1] in g}
        parts.append(_Part(Dfg(arcs, entries[i], exits[i]), skip[i]))
    return parts


# --- parallel ------------------------------------------------------------------------------

def _parallel_cut(dfg: Dfg) -> tuple[str, list[_Part]] | None:
    """Components of the inverted graph (activities not linked both ways belong together);
    a part without a start or an end activity is merged into its neighbour."""
    acts = sorted(dfg.activities)
    if not acts:
        return None
    apart = [(a, b) for i, a in enumerate(acts) for b in acts[i + 1:]
             if (a, b) not in dfg.arcs or (b, a) not in dfg.arcs]
    groups = sorted(_components(acts, apart), key=lambda g: (len(g), min(g)))
    starts, ends = set(dfg.starts), set(dfg.ends)
    i = 0
    while i < len(groups) and len(groups) > 1:
        if groups[i] & starts and groups[i] & ends:
            i += 1
            continue
        group = groups.pop(i)
        groups[max(i - 1, 0)] |= group
    if len(groups) < 2:
        return None
    return AND, [_Part(dfg.restricted(g)) for g in groups]


# --- loop ----------------------------------------------------------------------------------

def _loop_cut(dfg: Dfg) -> tuple[str, list[_Part]] | None:
    """Do-part: the start and end activities and what they cannot do without; redo-part: the
    rest, entered only from every end and leaving only to every start. A part without start
    and end activities (a sequence projection can leave one) has no do-part, hence no loop
    cut."""
    starts, ends = set(dfg.starts), set(dfg.ends)
    do = starts | ends
    if not dfg.arcs or not do:
        return None
    inner = [(a, b) for a, b in dfg.arcs if a not in do and b not in do]
    redo = _components(dfg.activities - do, inner)
    redo = _absorb(redo, do, {b for a, b in dfg.arcs if a in starts - ends})
    redo = _absorb(redo, do, {a for a, b in dfg.arcs if b in ends - starts})
    redo = [g for g in redo if _enters_every_start(g, dfg, starts)]
    redo = [g for g in redo if _left_from_every_end(g, dfg, ends)]
    if not redo:
        return None
    rest = set().union(*redo)
    do = dfg.activities - rest
    return LOOP, _project_loop(dfg, do, rest)


def _absorb(groups: list[set[str]], do: set[str], touched: set[str]) -> list[set[str]]:
    """Groups holding an activity of ``touched`` join the do-part (``do`` grows in place)."""
    kept = []
    for g in groups:
        if g & touched:
            do |= g
        else:
            kept.append(g)
    return kept


def _enters_every_start(group: set[str], dfg: Dfg, starts: set[str]) -> bool:
    for a in group:
        if any((a, s) in dfg.arcs for s in starts) and any(
                (a, s) not in dfg.arcs for s in starts):
            return False
    return True


def _left_from_every_end(group: set[str], dfg: Dfg, ends: set[str]) -> bool:
    for a in group:
        if any((e, a) in dfg.arcs for e in ends) and any((e, a) not in dfg.arcs for e in ends):
            return False
    return True


def _project_loop(dfg: Dfg, do: set[str], redo: set[str]) -> list[_Part]:
    """The do-part keeps the starts and ends; every redo activity may begin and end a redo
    trace; the redo-part may be empty when an end activity directly precedes a start."""
    arcs = {k: v for k, v in dfg.arcs.items() if k[0] in redo and k[1] in redo}
    redo_dfg = Dfg(arcs, dict.fromkeys(sorted(redo), 1), dict.fromkeys(sorted(redo), 1))
    back = any(a in dfg.ends and b in dfg.starts for a, b in dfg.arcs)
    return [_Part(dfg.restricted(do)), _Part(redo_dfg, back)]


# --- reduction -----------------------------------------------------------------------------

def simplify(tree: ProcessTree) -> ProcessTree:
    """Reduce a tree without changing its language: flatten ``->``, ``X`` and ``+`` nested in
    the same operator, drop tau from ``->`` and ``+``, keep one tau in ``X``, and replace an
    operator with one child (or a loop of taus) by that child."""
    if tree.is_leaf:
        return tree
    kids: list[ProcessTree] = []
    for child in (simplify(c) for c in tree.children):
        if tree.operator != LOOP and child.operator == tree.operator:
            kids.extend(child.children)
        else:
            kids.append(child)
    if tree.operator in (SEQ, AND):
        kids = [c for c in kids if not c.is_tau] or [TAU]
    elif tree.operator == XOR:
        first_tau = next((i for i, c in enumerate(kids) if c.is_tau), None)
        kids = [c for i, c in enumerate(kids) if not c.is_tau or i == first_tau]
    elif all(c.is_tau for c in kids):
        kids = [TAU]
    if len(kids) == 1:
        return kids[0]
    return ProcessTree(tree.operator, None, tuple(kids))


# --- on a Spark DataFrame ------------------------------------------------------------------

def dfg_of(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
           timestamp_col: str = TIMESTAMP, order_col: str | None = None,
           timezone: str = "UTC") -> Dfg:
    """The DFG of an event DataFrame, computed in Spark (one sort per case) and collected.

    Runs a Spark job (three, on the cached per-case table): the miner works on the DFG as
    Python data on the driver."""
    events = _discover.event_frame(df, case_col, activity_col, timestamp_col, order_col,
                                   timezone)
    with cached(_views.case_sequences(events), "case_sequences") as seqs:
        arcs = _views.dfg(seqs).select("source", "target", "frequency").collect()
        starts = _views.endpoint_activities(seqs, "start").collect()
        ends = _views.endpoint_activities(seqs, "end").collect()
    return Dfg.from_frames(arcs, starts, ends)


def discover_process_tree(df: DataFrame, case_col: str = CASE, activity_col: str = ACTIVITY,
                          timestamp_col: str = TIMESTAMP, order_col: str | None = None,
                          timezone: str = "UTC") -> ProcessTree:
    """IMd on the DFG of an event DataFrame (columns as in ``discover_dfg``).

    Runs a Spark job (:func:`dfg_of`) to collect the DFG the tree is mined from on the
    driver."""
    return inductive_miner_dfg(dfg_of(df, case_col, activity_col, timestamp_col, order_col,
                                      timezone))
