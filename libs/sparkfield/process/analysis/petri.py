"""Petri nets for process models: built from a process tree, written and read as PNML (the
flavour pm4py and ProM exchange) and drawn with Graphviz.

A net is plain data (:class:`PetriNet`): place ids, transitions with an activity label or
``None`` for a silent one, weighted arcs between a place and a transition, and the initial and
final markings (tokens per place). That is all a token game or a replay needs: a transition is
enabled when every place of its preset holds the arc's weight in tokens.

The translation of a tree is the usual block-structured one: each node fills the gap between
an entry and an exit place. An activity is one transition; a sequence chains its children
through new places; an exclusive choice lets every child share the entry and exit places; a
parallel node opens and closes its children with silent split and join transitions; a loop
``*( do, redo )`` enters through a silent transition, runs the do-part, then either leaves
through a silent transition or runs the redo-part back to the do-part. The result is a sound
workflow net: one token in ``source`` at the start, one in ``sink`` at the end.

Why one module: the net, its PNML form and its drawing share the naming of places and
transitions; apart, each would derive it again."""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sparkfield.process.analysis.inductive import AND, LOOP, SEQ, XOR, ProcessTree
from sparkfield.process.analysis.process_map import dot_string, render_svg

__all__ = ["Arc", "PetriNet", "PnmlError", "Transition", "from_process_tree", "read_pnml",
           "to_dot", "to_svg", "write_pnml"]

PNML_TYPE = "http://www.pnml.org/version-2009/grammar/pnmlcoremodel"
INVISIBLE = "$invisible$"


class PnmlError(ValueError):
    """A PNML file that cannot be read as a Petri net (the message says where and why)."""


@dataclass(frozen=True)
class Transition:
    """A transition; ``label`` is the activity it stands for, ``None`` when silent."""

    id: str
    label: str | None = None

    @property
    def silent(self) -> bool:
        return self.label is None


@dataclass(frozen=True)
class Arc:
    """An arc from a place to a transition or from a transition to a place."""

    source: str
    target: str
    weight: int = 1


@dataclass
class PetriNet:
    """A labelled Petri net with its initial and final markings (place id -> tokens)."""

    name: str
    places: list[str] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    arcs: list[Arc] = field(default_factory=list)
    initial_marking: dict[str, int] = field(default_factory=dict)
    final_marking: dict[str, int] = field(default_factory=dict)

    def transition(self, tid: str) -> Transition:
        for t in self.transitions:
            if t.id == tid:
                return t
        raise KeyError(tid)

    def preset(self, tid: str) -> dict[str, int]:
        """The places a transition consumes from, with the tokens it takes."""
        return {a.source: a.weight for a in self.arcs if a.target == tid}

    def postset(self, tid: str) -> dict[str, int]:
        """The places a transition produces into, with the tokens it puts."""
        return {a.target: a.weight for a in self.arcs if a.source == tid}

    @property
    def labels(self) -> set[str]:
        """The activities of the visible transitions."""
        return {t.label for t in self.transitions if t.label is not None}

    def validate(self) -> None:
        """Raise ``ValueError`` unless ids are unique, every arc joins a place and a
        transition with a positive weight, and the markings name places."""
        places, trans = set(self.places), {t.id for t in self.transitions}
        if len(places) != len(self.places) or len(trans) != len(self.transitions):
            raise ValueError("place and transition ids must be unique")
        if places & trans:
            raise ValueError(f"ids used for a place and a transition: {sorted(places & trans)}")
        for a in self.arcs:
            if not ((a.source in places and a.target in trans)
                    or (a.source in trans and a.target in places)):
                raise ValueError(f"arc {a.source} -> {a.target} must join a place and a "
                                 "transition of the net")
            if a.weight < 1:
                raise ValueError(f"arc {a.source} -> {a.target} has weight {a.weight}")
        for what, marking in (("initial", self.initial_marking),
                              ("final", self.final_marking)):
            unknown = sorted(set(marking) - places)
            if unknown or any(n < 0 for n in marking.values()):
                raise ValueError(f"the {what} marking names unknown places {unknown} "
                                 "or holds negative tokens")


# --- from a process tree -------------------------------------------------------------------

class _Builder:
    """Adds places, transitions and arcs with fresh ids."""

    def __init__(self, name: str) -> None:
        self.net = PetriNet(name)
        self._count = 0

    def _next(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def place(self, pid: str | None = None) -> str:
        pid = pid or self._next("p_")
        self.net.places.append(pid)
        return pid

    def transition(self, label: str | None, entry: str, exit_: str) -> str:
        tid = self._next("tau_" if label is None else "t_")
        self.net.transitions.append(Transition(tid, label))
        self.net.arcs.extend([Arc(entry, tid), Arc(tid, exit_)])
        return tid

    def silent(self, inputs: list[str], outputs: list[str]) -> None:
        tid = self._next("tau_")
        self.net.transitions.append(Transition(tid))
        self.net.arcs.extend([Arc(p, tid) for p in inputs] + [Arc(tid, p) for p in outputs])

    def block(self, tree: ProcessTree, entry: str, exit_: str) -> None:
        """Fill the gap between ``entry`` and ``exit_`` with ``tree``."""
        if tree.is_leaf:
            self.transition(tree.label, entry, exit_)
        elif tree.operator == SEQ:
            self._sequence(tree.children, entry, exit_)
        elif tree.operator == XOR:
            for child in tree.children:
                self.block(child, entry, exit_)
        elif tree.operator == AND:
            self._parallel(tree.children, entry, exit_)
        elif tree.operator == LOOP:
            self._loop(tree.children, entry, exit_)
        else:
            raise ValueError(f"unknown operator {tree.operator!r}")

    def _sequence(self, children: tuple[ProcessTree, ...], entry: str, exit_: str) -> None:
        gates = [entry] + [self.place() for _ in children[1:]] + [exit_]
        for i, child in enumerate(children):
            self.block(child, gates[i], gates[i + 1])

    def _parallel(self, children: tuple[ProcessTree, ...], entry: str, exit_: str) -> None:
        starts = [self.place() for _ in children]
        ends = [self.place() for _ in children]
        self.silent([entry], starts)
        for child, a, b in zip(children, starts, ends, strict=True):
            self.block(child, a, b)
        self.silent(ends, [exit_])

    def _loop(self, children: tuple[ProcessTree, ...], entry: str, exit_: str) -> None:
        if len(children) != 2:
            raise ValueError(f"a loop has a do- and a redo-part, not {len(children)} children")
        do_in, do_out = self.place(), self.place()
        self.silent([entry], [do_in])
        self.block(children[0], do_in, do_out)
        self.block(children[1], do_out, do_in)
        self.silent([do_out], [exit_])


def from_process_tree(tree: ProcessTree, name: str = "process_tree") -> PetriNet:
    """The workflow net of ``tree``: one token in ``source`` to one token in ``sink``."""
    builder = _Builder(name)
    source, sink = builder.place("source"), builder.place("sink")
    builder.block(tree, source, sink)
    net = builder.net
    net.initial_marking, net.final_marking = {source: 1}, {sink: 1}
    return net


# --- PNML ----------------------------------------------------------------------------------

def _text(parent: ET.Element, tag: str, value: str) -> None:
    ET.SubElement(ET.SubElement(parent, tag), "text").text = value


def to_pnml(net: PetriNet) -> bytes:
    """The net as PNML bytes (one page, ProM's marks for silent transitions and the final
    marking)."""
    net.validate()
    root = ET.Element("pnml")
    xnet = ET.SubElement(root, "net", id=net.name, type=PNML_TYPE)
    _text(xnet, "name", net.name)
    page = ET.SubElement(xnet, "page", id="n0")
    for pid in net.places:
        place = ET.SubElement(page, "place", id=pid)
        _text(place, "name", pid)
        if net.initial_marking.get(pid):
            _text(place, "initialMarking", str(net.initial_marking[pid]))
    for t in net.transitions:
        trans = ET.SubElement(page, "transition", id=t.id)
        _text(trans, "name", t.id if t.silent else t.label)
        if t.silent:
            ET.SubElement(trans, "toolspecific", tool="ProM", version="6.4",
                          activity=INVISIBLE, localNodeID=t.id)
    for i, a in enumerate(net.arcs):
        arc = ET.SubElement(page, "arc", id=f"arc_{i}", source=a.source, target=a.target)
        if a.weight != 1:
            _text(arc, "inscription", str(a.weight))
    marking = ET.SubElement(ET.SubElement(xnet, "finalmarkings"), "marking")
    for pid, tokens in net.final_marking.items():
        if tokens:
            place = ET.SubElement(marking, "place", idref=pid)
            ET.SubElement(place, "text").text = str(tokens)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_pnml(net: PetriNet, path_or_file: str | os.PathLike | IO) -> None:
    """Write ``net`` as PNML to a path or an open file (binary or text)."""
    data = to_pnml(net)
    if isinstance(path_or_file, (str, os.PathLike)):
        Path(path_or_file).write_bytes(data)
    elif isinstance(path_or_file, io.TextIOBase):
        path_or_file.write(data.decode("utf-8"))
    else:
        path_or_file.write(data)


def _local(tag: str) -> str:
    """The tag without its XML namespace (PNML files may or may not declare one)."""
    return tag.rsplit("}", 1)[-1]


def _child(el: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in el if _local(c.tag) == name), None)


def _child_text(el: ET.Element, name: str, strip: bool = True) -> str | None:
    """The text of ``<name><text>``; ``strip=False`` keeps it as written (an activity label:
    a trailing space is part of the name, as pm4py reads it)."""
    holder = _child(el, name)
    text = None if holder is None else _child(holder, "text")
    if text is None or text.text is None:
        return None
    return text.text.strip() if strip else text.text


def _count(value: str | None, what: str, where: str) -> int:
    try:
        n = int(value) if value is not None else 1
    except ValueError:
        raise PnmlError(f"{where}: {what} {value!r} is not a whole number") from None
    if n < 0:
        raise PnmlError(f"{where}: {what} {n} is negative")
    return n


def _nodes(container: ET.Element) -> list[ET.Element]:
    """Places, transitions and arcs of a net, pages (nested ones too, at any depth) flattened
    in document order; iterative, so no nesting exhausts Python's stack."""
    out = []
    pending = [iter(container)]
    while pending:
        el = next(pending[-1], None)
        if el is None:
            pending.pop()
            continue
        name = _local(el.tag)
        if name == "page":
            pending.append(iter(el))
        elif name in ("place", "transition", "arc"):
            out.append(el)
    return out


def _id(el: ET.Element, where: str) -> str:
    value = el.get("id")
    if not value:
        raise PnmlError(f"{where}: a <{_local(el.tag)}> has no id")
    return value


def _silent(el: ET.Element) -> bool:
    return any(_local(c.tag) == "toolspecific" and "ProM" in (c.get("tool") or "")
               and "invisible" in (c.get("activity") or "") for c in el)


def _net_element(root: ET.Element, where: str) -> ET.Element:
    if _local(root.tag) != "pnml":
        raise PnmlError(f"{where}: the root element is <{_local(root.tag)}>, not <pnml>")
    nets = [c for c in root if _local(c.tag) == "net"]
    if len(nets) != 1:
        raise PnmlError(f"{where}: {len(nets)} <net> elements; one is expected")
    return nets[0]


def _final_marking(xnet: ET.Element, where: str) -> dict[str, int] | None:
    holder = _child(xnet, "finalmarkings")
    marking = None if holder is None else _child(holder, "marking")
    if marking is None:
        return None
    out = {}
    for place in marking:
        ref = place.get("idref")
        if _local(place.tag) != "place" or not ref:
            raise PnmlError(f"{where}: a final marking entry needs <place idref=...>")
        text = _child(place, "text")
        out[ref] = _count(None if text is None else text.text, "final marking", where)
    return out


def read_pnml(path_or_file: str | os.PathLike | IO) -> PetriNet:
    """A Petri net from a PNML file. Silent transitions carry ProM's ``$invisible$`` mark; a
    transition without a name is labelled with its id, a named one with its name as written
    (spaces kept, as pm4py reads it). Without a final marking in the file, each place with no
    outgoing arc gets one token (as pm4py guesses it). Raises :class:`PnmlError` naming the
    file and the problem."""
    where = str(path_or_file) if isinstance(path_or_file, (str, os.PathLike)) else "PNML"
    try:
        root = ET.parse(path_or_file).getroot()
    except ET.ParseError as exc:
        raise PnmlError(f"{where}: not well-formed XML ({exc})") from None
    except OSError as exc:
        raise PnmlError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    xnet = _net_element(root, where)
    net = PetriNet(xnet.get("id") or _child_text(xnet, "name") or "net")
    for el in _nodes(xnet):
        kind = _local(el.tag)
        if kind == "place":
            pid = _id(el, where)
            net.places.append(pid)
            tokens = _count(_child_text(el, "initialMarking") or "0", "initial marking", where)
            if tokens:
                net.initial_marking[pid] = tokens
        elif kind == "transition":
            tid = _id(el, where)
            net.transitions.append(Transition(tid, None if _silent(el) else
                                              _child_text(el, "name", strip=False) or tid))
        else:
            source, target = el.get("source"), el.get("target")
            if not source or not target:
                raise PnmlError(f"{where}: arc {el.get('id')!r} needs a source and a target")
            net.arcs.append(Arc(source, target,
                                _count(_child_text(el, "inscription"), "arc weight", where)))
    final = _final_marking(xnet, where)
    net.final_marking = final if final is not None else _sinks(net)
    try:
        net.validate()
    except ValueError as exc:
        raise PnmlError(f"{where}: {exc}") from None
    return net


def _sinks(net: PetriNet) -> dict[str, int]:
    feeding = {a.source for a in net.arcs}
    return {p: 1 for p in net.places if p not in feeding}


# --- drawing -------------------------------------------------------------------------------

def to_dot(net: PetriNet) -> str:
    """DOT text: places as circles (tokens shown, final places doubled), visible transitions
    as labelled boxes, silent ones as small black boxes."""
    lines = [f"digraph {dot_string(net.name)} {{", '  rankdir=LR; bgcolor="white";',
             '  node [fontname="Helvetica"]; edge [fontname="Helvetica", fontsize=10];']
    for pid in net.places:
        tokens = net.initial_marking.get(pid, 0)
        label = "" if not tokens else ("\u25cf" if tokens == 1 else str(tokens))
        shape = "doublecircle" if net.final_marking.get(pid) else "circle"
        lines.append(f"  {dot_string('p:' + pid)} [shape={shape}, label={dot_string(label)}, "
                     "width=0.4, fixedsize=true];")
    for t in net.transitions:
        if t.silent:
            attrs = 'shape=box, style=filled, fillcolor=black, label="", width=0.15, height=0.4'
        else:
            attrs = f"shape=box, label={dot_string(t.label)}"
        lines.append(f"  {dot_string('t:' + t.id)} [{attrs}];")
    places = set(net.places)
    for a in net.arcs:
        src = ("p:" if a.source in places else "t:") + a.source
        dst = ("p:" if a.target in places else "t:") + a.target
        weight = f" [label={dot_string(str(a.weight))}]" if a.weight != 1 else ""
        lines.append(f"  {dot_string(src)} -> {dot_string(dst)}{weight};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(net: PetriNet, timeout: int = 120) -> str:
    """The net drawn as SVG by Graphviz ``dot`` (``RenderError`` when it is missing)."""
    return render_svg(to_dot(net), timeout)
