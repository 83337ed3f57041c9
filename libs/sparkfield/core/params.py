"""One declared parameter schema per job: the single source of the job's conf keys, their types,
ranges and defaults, its command-line flags and the parameter tables of the job manuals
(docs/jobs/).

A :class:`Param` names a key of the job section (dotted for nested keys, ``search.grid_step_m``).
:meth:`JobSchema.validate` checks a merged job section against the schema: an unknown key is an
error that names the nearest valid key, a value of the wrong type or out of range is an error,
and every missing key gets its default. Every job checks the same way, so the same bad value
(``--sample 0``) gives the same error and exit code everywhere.

An :class:`AppendFlag` is a repeatable flag that adds one entry to a ``list[dict]`` parameter
(``--filter-case-size 2 10`` adds a filter to ``filters``) after the entries of the conf files,
in the order the flags are given.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import functools
import importlib
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkfield.core.errors import ConfigError

KINDS = ("str", "timestamp", "timezone", "int", "float", "bool", "fraction", "list[float]",
         "list[str]", "list[dict]", "dict[str,float]", "dict[str,str]", "dict[str,list[str]]")


@dataclass(frozen=True)
class Param:
    """One job parameter.

    ``kind`` is one of :data:`KINDS`; ``fraction`` is a float in (0, 1]. ``gt``/``ge``/``le``
    bound numbers (and every element of a numeric list or mapping). ``nullable``: null is a valid
    value (always true when the default is null). ``flag``: the command-line flag, or None for a
    conf-only key. ``group``: flags of one group are mutually exclusive. ``pattern``: a regular
    expression a string value must match in full.
    """

    key: str
    kind: str
    default: Any = None
    help: str = ""
    flag: str | None = None
    choices: tuple[str, ...] | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    nullable: bool = False
    group: str | None = None
    pattern: str | None = None
    in_conf: bool = True  # False: set by the entry point (run_date), not a conf file key

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.key}: unknown kind {self.kind!r}")

    @property
    def allows_null(self) -> bool:
        return self.nullable or self.default is None

    @property
    def dest(self) -> str:
        return self.key.replace(".", "__")

    def check(self, value: Any) -> tuple[Any, str | None]:
        """(the value coerced to the kind, None) or (None, what is wrong)."""
        if value is None:
            return (None, None) if self.allows_null else (None, "must not be null")
        try:
            out = _coerce(self.kind, value)
        except (TypeError, ValueError) as exc:
            return None, str(exc)
        for v in _numbers(self.kind, out):
            if self.gt is not None and not v > self.gt:
                return None, f"must be > {_num(self.gt)}, got {_num(v)}"
            if self.ge is not None and not v >= self.ge:
                return None, f"must be >= {_num(self.ge)}, got {_num(v)}"
            if self.le is not None and not v <= self.le:
                return None, f"must be <= {_num(self.le)}, got {_num(v)}"
        if self.kind == "fraction" and not 0 < out <= 1:
            return None, f"must be in (0, 1], got {_num(out)}"
        if self.choices is not None and out not in self.choices:
            near = difflib.get_close_matches(str(out), self.choices, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return None, f"must be one of {', '.join(self.choices)}, got {out!r}{hint}"
        if self.pattern is not None and not re.fullmatch(self.pattern, out):
            return None, f"{out!r} is not valid here"
        return out, None


def _num(v: float) -> str:
    return f"{v:g}"


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _coerce(kind: str, value: Any) -> Any:
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected text, got {value!r}")
        return value
    if kind == "timestamp":  # YAML reads an unquoted 2020-01-01 as a date
        if isinstance(value, datetime.date):
            return value.isoformat()
        if not isinstance(value, str):
            raise TypeError(f"expected a date or timestamp, got {value!r}")
        return value
    if kind == "timezone":
        if not isinstance(value, str):
            raise TypeError(f"expected a time zone as text, got {value!r} (quote an offset: "
                            "'+02:00')")
        problem = timezone_problem(value)
        if problem:
            raise ValueError(problem)
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"expected true or false, got {value!r}")
        return value
    if kind == "int":
        if _is_number(value) and float(value).is_integer():
            return int(value)
        raise TypeError(f"expected an integer, got {value!r}")
    if kind in ("float", "fraction"):
        if _is_number(value):
            return float(value)
        raise TypeError(f"expected a number, got {value!r}")
    if kind == "list[float]":
        if isinstance(value, str):
            value = [v for v in (p.strip() for p in value.split(",")) if v]
            try:
                return [float(v) for v in value]
            except ValueError as exc:
                raise TypeError(f"expected numbers separated by commas: {exc}") from None
        if isinstance(value, list) and all(_is_number(v) for v in value):
            return [float(v) for v in value]
        raise TypeError(f"expected a list of numbers, got {value!r}")
    if kind == "list[str]":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise TypeError(f"expected a list of texts, got {value!r}")
    if kind == "list[dict]":  # what each entry holds is checked by the job (e.g. its filters)
        if isinstance(value, list) and all(
                isinstance(v, dict) and all(isinstance(k, str) for k in v) for v in value):
            return [dict(v) for v in value]
        raise TypeError(f"expected a list of mappings, got {value!r}")
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"expected a mapping, got {value!r}")
    if kind == "dict[str,float]":
        if all(_is_number(v) for v in value.values()):
            return {k: float(v) for k, v in value.items()}
        raise TypeError(f"expected numbers as values, got {value!r}")
    if kind == "dict[str,str]":
        if all(isinstance(v, str) for v in value.values()):
            return dict(value)
        raise TypeError(f"expected texts as values, got {value!r}")
    # dict[str,list[str]]
    if all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in value.values()):
        return {k: list(v) for k, v in value.items()}
    raise TypeError(f"expected lists of texts as values, got {value!r}")


# What Spark takes for a time zone (DateTimeUtils.getZoneId: java.time.ZoneId.of with the
# short ids): a region of the time-zone database, a fixed offset, optionally after UTC/GMT/UT.
_SHORT_IDS = frozenset({"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST",
                        "CTT", "EAT", "ECT", "EST", "HST", "IET", "IST", "JST", "MIT", "MST",
                        "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST"})
_OFFSET = re.compile(r"[+-](\d{1,2}|\d{2}:?\d{2}|\d{2}:\d{2}:\d{2}|\d{6})")


def timezone_problem(name: str) -> str | None:
    """None when Spark takes ``name`` as a time zone, else what is wrong; checked against
    :mod:`zoneinfo`'s database, so before any JVM starts."""
    # Spark reads +h:mm and +hh:m too
    text = re.sub(r"([+-])(\d):", r"\g<1>0\2:", name, count=1)
    text = re.sub(r"([+-]\d\d):(\d)$", r"\1:0\2", text, count=1)
    offset = re.sub(r"^(UTC|GMT|UT)(?=[+-]|$)", "", text)
    if text == "Z" or text in _SHORT_IDS or (offset != text and not offset):
        return None
    if offset.startswith(("+", "-")):
        if _offset_ok(offset):
            return None
        return f"{name!r} is not a valid offset (from -18:00 to +18:00, e.g. +02:00)"
    regions = _regions()
    if not regions or text in regions:  # no database here: Spark has its own
        return None
    near = [r for r in regions if r.lower() == name.lower()] or \
        difflib.get_close_matches(name, sorted(regions), n=1)
    hint = f"did you mean {near[0]!r}?" if near else \
        "a region such as America/Sao_Paulo, UTC, or an offset such as +02:00"
    return f"{name!r} is not a time zone ({hint})"


def _offset_ok(offset: str) -> bool:
    if not _OFFSET.fullmatch(offset):
        return False
    digits = offset[1:].replace(":", "")
    hours, minutes, seconds = (int(digits), 0, 0) if len(digits) <= 2 else \
        (int(digits[:2]), int(digits[2:4]), int(digits[4:6] or 0))
    return minutes < 60 and seconds < 60 and hours * 3600 + minutes * 60 + seconds <= 18 * 3600


@functools.cache
def _regions() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones() - {"Factory", "localtime", "posixrules"})


def _numbers(kind: str, value: Any) -> Iterable[float]:
    if kind in ("int", "float", "fraction"):
        return [value]
    if kind == "list[float]":
        return value
    if kind == "dict[str,float]":
        return value.values()
    return []


def key_values(text: str) -> dict[str, float]:
    """Flag value ``theft=50,mischief=100`` -> {"theft": 50.0, "mischief": 100.0}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected NAME=METRES, got {part!r}")
        try:
            out[key.strip()] = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a number in {part!r}") from exc
    return out


def float_list(text: str) -> list[float]:
    """Flag value ``10,1`` -> [10.0, 1.0]."""
    try:
        return [float(v) for v in (p.strip() for p in text.split(",")) if v]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") \
            from exc


_FLAG_TYPES = {"int": int, "float": float, "fraction": float, "str": str,
               "list[float]": float_list, "dict[str,float]": key_values}


@dataclass(frozen=True)
class AppendFlag:
    """A repeatable flag that appends one entry to the ``list[dict]`` parameter ``target``:
    after the entries the conf files give, in the order the flags are given on the command
    line. ``parse`` turns the flag's values (``min_values`` to ``max_values`` of them, shown as
    ``metavar``, e.g. ``START END [MODE]``) into the entry, raising ValueError saying what is
    wrong; argparse's error then names the flag (exit 2 before any work)."""

    flag: str
    target: str
    metavar: str
    parse: Callable[[list[str]], dict[str, Any]]
    help: str = ""
    min_values: int = 1
    max_values: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.min_values <= self.max_values:
            raise ValueError(f"{self.flag}: takes {self.min_values} to {self.max_values} "
                             "values")

    @property
    def nargs(self) -> int | str | None:
        if self.min_values == self.max_values:
            return None if self.min_values == 1 else self.min_values
        return "+"  # the count is checked by _AppendEntry

    def entry(self, values: list[str]) -> dict[str, Any]:
        """The entry of one use of the flag; ValueError saying what is wrong."""
        if not self.min_values <= len(values) <= self.max_values:
            low, high = self.min_values, self.max_values
            want = str(low) if low == high else f"{low} or {high}" if high == low + 1 else \
                f"{low} to {high}"
            raise ValueError(f"expected {want} values ({self.metavar}), got {len(values)}")
        return self.parse(values)


APPENDED = "_appended"  # where the append flags leave their (target, entry) pairs, in order


class _AppendEntry(argparse.Action):
    """One use of an :class:`AppendFlag`: its entry appended to the pairs in ``dest``."""

    def __init__(self, option_strings: Sequence[str], dest: str, spec: AppendFlag,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.spec = spec
        self.shown_args = spec.metavar  # what HelpFormatter shows for the values

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        given = [values] if isinstance(values, str) else list(values)
        try:
            entry = self.spec.entry(given)
        except ValueError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        pairs = list(getattr(namespace, self.dest, None) or [])
        pairs.append((self.spec.target, entry))
        setattr(namespace, self.dest, pairs)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, showing an append flag's values as its metavar writes them
    (``--filter-time-range START END [MODE]``)."""

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        shown = getattr(action, "shown_args", None)
        return shown if shown is not None else super()._format_args(action, default_metavar)


# Keys every job has; the entry point adds their flags (and --run-date) itself.
def common_params(output: str) -> list[Param]:
    return [
        Param("output", "str", output, "output directory (replaced atomically; null in conf: "
              "nothing is written)", flag="--output", nullable=True),
        Param("sample", "fraction", None, "fraction of the input to use (seeded), e.g. 0.01 "
              "for a first look", flag="--sample"),
        Param("max_reject_fraction", "float", None, "exit 3 when rejected rows / input rows "
              "exceeds this (outputs are still written)", flag="--max-reject-fraction",
              ge=0, le=1),
        Param("run_date", "str", None, "YYYY-MM-DD: write into OUTPUT/run_date=... (a re-run "
              "replaces only that date)", pattern=r"\d{4}-\d{2}-\d{2}", in_conf=False),
    ]


class JobSchema:
    """The parameters of one job, in the order flags and tables list them."""

    def __init__(self, job: str, params: Sequence[Param], output: str | None = None,
                 preflight: Callable[[dict[str, Any], Any], None] | None = None,
                 append_flags: Sequence[AppendFlag] = ()):
        self.job = job
        # the module that declares the schema: executors import it to rebuild parsed values
        self.module: str = sys._getframe(1).f_globals.get("__name__", "__main__")
        # checks of the environment before any JVM starts: (validated job section, Config)
        self.preflight = preflight
        self.params: list[Param] = [*common_params(output or f"out/{job}"), *params]
        self.by_key = {p.key: p for p in self.params}
        if len(self.by_key) != len(self.params):
            raise ValueError(f"{job}: duplicate parameter keys")
        self.append_flags: list[AppendFlag] = list(append_flags)
        for a in self.append_flags:
            if getattr(self.by_key.get(a.target), "kind", None) != "list[dict]":
                raise ValueError(f"{job}: {a.flag} appends to {a.target!r}, which is not a "
                                 "list[dict] parameter")
        flags = [p.flag for p in self.params if p.flag] + [a.flag for a in self.append_flags]
        if len(set(flags)) != len(flags):
            raise ValueError(f"{job}: duplicate flags")
        self.sections = {k.rsplit(".", 1)[0] for k in self.by_key if "." in k}
        self._types: dict[str, type] = {}
        _BY_JOB[job] = self
        for s in list(self.sections):  # parents of nested sections
            while "." in s:
                s = s.rsplit(".", 1)[0]
                self.sections.add(s)

    # -- conf ----------------------------------------------------------------------------------
    def defaults(self, conf_only: bool = True) -> dict[str, Any]:
        """The nested default job section (what conf/jobs/<job>.yaml holds)."""
        out: dict[str, Any] = {}
        for p in self.params:
            if conf_only and not p.in_conf:
                continue
            _set(out, p.key, p.default)
        return out

    def validate(self, job: dict[str, Any] | None) -> dict[str, Any]:
        """The job section checked against the schema, values coerced and defaults filled in;
        :class:`ConfigError` naming every problem otherwise."""
        problems: list[str] = []
        values: dict[str, Any] = {}
        self._walk(job or {}, "", values, problems)
        if problems:
            raise ConfigError(f"{self.job}: " + "; ".join(problems))
        out: dict[str, Any] = {}
        for p in self.params:
            _set(out, p.key, values.get(p.key, p.default))
        return out

    def parse(self, job: dict[str, Any] | None) -> Any:
        """The job section validated (:meth:`validate`) as a typed, frozen object built from
        the schema: a section is an attribute (``p.search.grid_step_m``, ``p.output``), so a
        parameter is declared once, here, with its default and bounds."""
        return self._build(self.validate(job), "")

    def params_type(self, section: str = "") -> type:
        """The frozen dataclass :meth:`parse` builds for ``section`` ("" for the whole job)."""
        if section not in self._types:
            prefix = f"{section}." if section else ""
            fields: list[tuple[str, Any]] = []
            children = sorted({k[len(prefix):].split(".", 1)[0] for k in self.by_key
                               if k.startswith(prefix) and "." in k[len(prefix):]})
            for p in self.params:
                if p.key.startswith(prefix) and "." not in p.key[len(prefix):]:
                    fields.append((p.key[len(prefix):], _annotation(p)))
            for child in children:
                fields.append((child, self.params_type(prefix + child).__name__))
            for name, _ in fields:
                if not name.isidentifier():
                    raise ValueError(f"{self.job}: {prefix}{name} is not a valid attribute name")
            words = [self.job, *section.split(".")] if section else [self.job]
            name = "".join(w.title().replace("_", "") for w in words) + "Params"
            cls = dataclasses.make_dataclass(name, fields, frozen=True, namespace={
                "__reduce__": _reduce_params, "_job": self.job, "_section": section,
                "_schema_module": self.module})
            cls.__module__ = __name__
            self._types[section] = cls
        return self._types[section]

    def _build(self, values: dict[str, Any], section: str) -> Any:
        cls = self.params_type(section)
        prefix = f"{section}." if section else ""
        kwargs = {f.name: (self._build(values[f.name], prefix + f.name)
                           if prefix + f.name in self.sections else values[f.name])
                  for f in dataclasses.fields(cls)}
        return cls(**kwargs)

    def _walk(self, node: Any, prefix: str, values: dict[str, Any], problems: list[str]) -> None:
        if not isinstance(node, dict):
            problems.append(f"{prefix.rstrip('.')}: expected a mapping, got {node!r}")
            return
        for key, value in node.items():
            path = f"{prefix}{key}"
            if path in self.by_key:
                coerced, problem = self.by_key[path].check(value)
                if problem:
                    problems.append(f"{path} {problem}")
                else:
                    values[path] = coerced
            elif path in self.sections:
                if value is not None:
                    self._walk(value, path + ".", values, problems)
            else:
                problems.append(f"unknown key {path!r}{self._suggest(path)}")

    def _suggest(self, path: str) -> str:
        names = sorted(self.by_key) + sorted(self.sections)
        near = difflib.get_close_matches(path, names, n=1, cutoff=0.6)
        if not near:  # a misspelt leaf under a right section, or the leaf alone
            leaf = path.rsplit(".", 1)[-1]
            by_leaf = {n.rsplit(".", 1)[-1]: n for n in names}
            near = [by_leaf[m] for m in difflib.get_close_matches(leaf, by_leaf, n=1)]
        return f" (did you mean {near[0]!r}?)" if near else ""

    # -- flags ---------------------------------------------------------------------------------
    def add_flags(self, parser: argparse.ArgumentParser,
                  action: type[argparse.Action] | None = None) -> None:
        """One flag per parameter that has one; absent flags leave no attribute behind, so
        :meth:`overrides` holds only what was given."""
        groups: dict[str, Any] = {}
        for p in self.params:
            if not p.flag:
                continue
            target: Any = parser
            if p.group:
                if p.group not in groups:
                    groups[p.group] = parser.add_mutually_exclusive_group()
                target = groups[p.group]
            kwargs: dict[str, Any] = {"dest": p.dest, "default": argparse.SUPPRESS,
                                      "help": _flag_help(p)}
            if p.kind == "bool":
                kwargs["action"] = argparse.BooleanOptionalAction
            else:
                kwargs["type"] = _FLAG_TYPES.get(p.kind, str)
                if action is not None:
                    kwargs["action"] = action
                kwargs["metavar"] = _metavar(p)
                if p.choices:
                    kwargs["choices"] = p.choices
            target.add_argument(p.flag, **kwargs)
        for a in self.append_flags:
            parser.add_argument(a.flag, dest=APPENDED, action=_AppendEntry, spec=a,
                                nargs=a.nargs, metavar=a.metavar, default=argparse.SUPPRESS,
                                help=_append_help(a))

    def overrides(self, args: argparse.Namespace) -> dict[str, Any]:
        """The nested job overrides of the flags that were given (the append flags' entries
        are added by :meth:`append_entries`, once the conf files are merged)."""
        job: dict[str, Any] = {}
        for p in self.params:
            if p.flag and hasattr(args, p.dest):
                _set(job, p.key, getattr(args, p.dest))
        return {"job": job}

    def append_entries(self, job: dict[str, Any], args: argparse.Namespace) -> None:
        """Appends the entries of the append flags given to their lists in ``job`` (the merged
        job section), after the conf files' entries, in the order the flags were given. A
        target the conf leaves null starts empty; one that is not a list is left for
        :meth:`validate` to name."""
        for target, entry in getattr(args, APPENDED, None) or []:
            *parents, leaf = target.split(".")
            node = job
            for part in parents:
                node = node.setdefault(part, {})
            current = node.get(leaf)
            if current is None:
                current = []
            if isinstance(current, list):
                node[leaf] = [*current, entry]

    # -- docs ----------------------------------------------------------------------------------
    def markdown_table(self) -> str:
        rows = ["| key | flag | default | meaning |", "|---|---|---|---|"]
        for p in self.params:
            if not p.in_conf:
                continue
            flag = f"`{p.flag}`" if p.flag else ""
            meaning = _describe(p).replace("|", "\\|")
            rows.append(f"| `{p.key}` | {flag} | {_show(p.default)} | {meaning} |")
            for a in self.append_flags:
                if a.target == p.key:
                    meaning = _append_meaning(a).replace("|", "\\|")
                    rows.append(f"| `{p.key}` | `{a.flag} {a.metavar}` |  | {meaning} |")
        return "\n".join(rows)


_BY_JOB: dict[str, JobSchema] = {}


def _reduce_params(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    # the classes are made at run time: pickle (to executors) by the module declaring the
    # schema, the job, the section and the values
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _rebuild_params, (obj._schema_module, obj._job, obj._section, values)


def _rebuild_params(module: str, job: str, section: str, values: dict[str, Any]) -> Any:
    if job not in _BY_JOB:
        importlib.import_module(module)  # declares the job's schema
    return _BY_JOB[job].params_type(section)(**values)


_ANNOTATIONS = {"str": "str", "timestamp": "str", "timezone": "str", "int": "int",
                "float": "float", "bool": "bool", "fraction": "float"}


def _annotation(p: Param) -> str:
    kind = _ANNOTATIONS.get(p.kind, p.kind.replace(",", ", "))
    return f"{kind} | None" if p.allows_null else kind


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        d = d.setdefault(part, {})
    d[leaf] = value


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        import json

        return "`" + json.dumps(value, separators=(", ", ": ")).replace("|", "\\|") + "`"
    return f"`{value}`" if isinstance(value, str) else str(value)


def _describe(p: Param) -> str:
    text = p.help
    limits = []
    if p.choices:
        limits.append("one of " + ", ".join(p.choices))
    if p.kind == "fraction":
        limits.append("in (0, 1]")
    for op, bound in ((">", p.gt), (">=", p.ge), ("<=", p.le)):
        if bound is not None:
            limits.append(f"{op} {_num(bound)}")
    if limits:
        text = f"{text} ({'; '.join(limits)})" if text else "; ".join(limits)
    return text


def _flag_help(p: Param) -> str:
    text = _describe(p)
    text = f"{text} [conf: {p.key}, default: {_show(p.default).strip('`')}]" if p.in_conf \
        else text
    return text.replace("%", "%%")  # argparse formats help with %


def _append_meaning(a: AppendFlag) -> str:
    return f"appends to {a.target}: {a.help}" if a.help else f"appends to {a.target}"


def _append_help(a: AppendFlag) -> str:
    text = f"{_append_meaning(a)} [repeatable: after the conf's {a.target}, in the order given]"
    return text.replace("%", "%%")


def _metavar(p: Param) -> str:
    if p.choices:
        return "{" + ",".join(p.choices) + "}"
    return {"int": "N", "float": "X", "timestamp": "YYYY-MM-DD", "timezone": "ZONE",
            "fraction": "FRACTION",
            "list[float]": "X,X,...", "dict[str,float]": "NAME=X,..."}.get(
        p.kind, p.key.rsplit(".", 1)[-1].upper())


def render_tables(text: str, schemas: Iterable[JobSchema]) -> tuple[str, set[str]]:
    """``text`` with every table between ``<!-- params:JOB -->`` and ``<!-- /params:JOB -->``
    replaced by that job's schema table, and the jobs whose tables it holds (any Markdown file
    may hold any of them, each at most once)."""
    found: set[str] = set()
    for schema in schemas:
        start, end = f"<!-- params:{schema.job} -->", f"<!-- /params:{schema.job} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        block = f"{start}\n{schema.markdown_table()}\n{end}"
        text, n = pattern.subn(lambda _m, b=block: b, text)
        if n > 1:
            raise ValueError(f"{n} blocks {start} ... {end} in one file, expected at most 1")
        if n:
            found.add(schema.job)
    return text, found


def table_files(root: Path) -> list[Path]:
    """The Markdown files that may hold parameter tables: README.md and everything in docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def render_docs(root: Path, schemas: Iterable[JobSchema]) -> dict[Path, str]:
    """Every Markdown file under ``root`` that holds tables, rendered; each job's table must be
    in exactly one file."""
    schemas = list(schemas)
    out: dict[Path, str] = {}
    where: dict[str, list[Path]] = {s.job: [] for s in schemas}
    for path in table_files(root):
        if not path.exists():
            continue
        text, found = render_tables(path.read_text(encoding="utf-8"), schemas)
        for job in found:
            where[job].append(path)
        if found:
            out[path] = text
    wrong = {job: paths for job, paths in where.items() if len(paths) != 1}
    if wrong:
        raise ValueError("each job's parameter table must be in exactly one file: " + "; ".join(
            f"{job}: {len(paths)} ({', '.join(str(p) for p in paths) or 'none'})"
            for job, paths in sorted(wrong.items())))
    return out
