"""The command-line side of a job's parameters: flag value types, repeatable flags that append
to a list parameter, the help formatter and the help texts (shared with the manuals' tables).
A parameter is any object with :class:`sparkfield.core.params.Param`'s fields."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


def num(v: float) -> str:
    """A bound or value as the messages and tables show it."""
    return f"{v:g}"


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


def text_list(text: str) -> list[str]:
    """Flag value ``a, b,c`` -> ["a", "b", "c"] (a text with a comma goes in the conf file)."""
    return [v for v in (p.strip() for p in text.split(",")) if v]


FLAG_TYPES = {"int": int, "float": float, "fraction": float, "str": str,
              "list[float]": float_list, "list[str]": text_list,
              "dict[str,float]": key_values}


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
        return "+"  # the count is checked by AppendEntry

    def entry(self, values: list[str]) -> dict[str, Any]:
        """The entry of one use of the flag; ValueError saying what is wrong."""
        if not self.min_values <= len(values) <= self.max_values:
            low, high = self.min_values, self.max_values
            want = str(low) if low == high else f"{low} or {high}" if high == low + 1 else \
                f"{low} to {high}"
            raise ValueError(f"expected {want} values ({self.metavar}), got {len(values)}")
        return self.parse(values)


APPENDED = "_appended"  # where the append flags leave their (target, entry) pairs, in order


class AppendEntry(argparse.Action):
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


def show_value(value: Any) -> str:
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


def describe(p: Any) -> str:
    text = p.help
    limits = []
    if p.choices:
        limits.append("one of " + ", ".join(p.choices))
    if p.kind == "fraction":
        limits.append("in (0, 1]")
    for op, bound in ((">", p.gt), (">=", p.ge), ("<=", p.le)):
        if bound is not None:
            limits.append(f"{op} {num(bound)}")
    if limits:
        text = f"{text} ({'; '.join(limits)})" if text else "; ".join(limits)
    return text


def flag_help(p: Any) -> str:
    text = describe(p)
    text = f"{text} [conf: {p.key}, default: {show_value(p.default).strip('`')}]" if p.in_conf \
        else text
    return text.replace("%", "%%")  # argparse formats help with %


def append_meaning(a: AppendFlag) -> str:
    return f"appends to {a.target}: {a.help}" if a.help else f"appends to {a.target}"


def append_help(a: AppendFlag) -> str:
    text = f"{append_meaning(a)} [repeatable: after the conf's {a.target}, in the order given]"
    return text.replace("%", "%%")


def metavar(p: Any) -> str:
    if p.choices:
        return "{" + ",".join(p.choices) + "}"
    return {"int": "N", "float": "X", "timestamp": "YYYY-MM-DD", "timezone": "ZONE",
            "fraction": "FRACTION",
            "list[float]": "X,X,...", "list[str]": "A,B,...",
            "dict[str,float]": "NAME=X,..."}.get(
        p.kind, p.key.rsplit(".", 1)[-1].upper())
