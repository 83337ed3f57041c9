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

Why one module: a schema's validation, its typed objects and their pickling walk the same
declared keys. Flags, the manuals' tables and time zones live in :mod:`.param_flags`,
:mod:`.param_docs` and :mod:`.timezones`."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import importlib
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sparkfield.core.errors import ConfigError
from sparkfield.core.param_flags import (
    APPENDED,
    FLAG_TYPES,
    AppendEntry,
    AppendFlag,
    append_help,
    flag_help,
    metavar,
    num,
)
from sparkfield.core.timezones import timezone_problem

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
                return None, f"must be > {num(self.gt)}, got {num(v)}"
            if self.ge is not None and not v >= self.ge:
                return None, f"must be >= {num(self.ge)}, got {num(v)}"
            if self.le is not None and not v <= self.le:
                return None, f"must be <= {num(self.le)}, got {num(v)}"
        if self.kind == "fraction" and not 0 < out <= 1:
            return None, f"must be in (0, 1], got {num(out)}"
        if self.choices is not None and out not in self.choices:
            near = difflib.get_close_matches(str(out), self.choices, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return None, f"must be one of {', '.join(self.choices)}, got {out!r}{hint}"
        if self.pattern is not None and not re.fullmatch(self.pattern, out):
            return None, f"{out!r} is not valid here (expected {self.help.split(': ')[0]})"
        return out, None




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


def _numbers(kind: str, value: Any) -> Iterable[float]:
    if kind in ("int", "float", "fraction"):
        return [value]
    if kind == "list[float]":
        return value
    if kind == "dict[str,float]":
        return value.values()
    return []


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
                                      "help": flag_help(p)}
            if p.kind == "bool":
                kwargs["action"] = argparse.BooleanOptionalAction
            else:
                kwargs["type"] = FLAG_TYPES.get(p.kind, str)
                if action is not None:
                    kwargs["action"] = action
                kwargs["metavar"] = metavar(p)
                if p.choices:
                    kwargs["choices"] = p.choices
            target.add_argument(p.flag, **kwargs)
        for a in self.append_flags:
            parser.add_argument(a.flag, dest=APPENDED, action=AppendEntry, spec=a,
                                nargs=a.nargs, metavar=a.metavar, default=argparse.SUPPRESS,
                                help=append_help(a))

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


