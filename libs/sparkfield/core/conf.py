"""Configuration: base + profile + job YAML, then command-line overrides.

The merged result is a plain nested dict wrapped in :class:`Config`, which gives typed access
to the parts every job shares (Spark settings, practices) and leaves the job section to the
job's own typed parameters.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sparkfield.core.errors import ConfigError

CONF_ENV = "SPARKFIELD_CONF_DIR"



def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated by ``overlay`` recursively; ``None`` in the overlay keeps nothing
    special (it sets the value to None) so profiles can unset a base setting explicitly."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def find_conf_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where the YAML files are: the flag (which must hold base.yaml: a mistyped path is an
    error, never a silent fall-back), then $SPARKFIELD_CONF_DIR, then ./conf, then the working
    directory itself (spark-submit --files puts files there, flattened), then the default conf
    an installed wheel carries (``sparkfield.conf``)."""
    if explicit:
        cand = Path(explicit)
        if not cand.is_dir():
            raise ConfigError(f"conf dir {explicit} not found (--conf-dir)")
        if not (cand / "base.yaml").is_file():
            raise ConfigError(f"no base.yaml in conf dir {explicit} (--conf-dir)")
        return cand
    candidates: list[Path] = []
    if os.environ.get(CONF_ENV):
        candidates.append(Path(os.environ[CONF_ENV]))
    candidates += [Path.cwd() / "conf", Path.cwd()]
    for cand in candidates:
        if (cand / "base.yaml").is_file():
            return cand
    packaged = _packaged_conf()
    if packaged is not None:
        return packaged
    raise ConfigError(
        "cannot find the conf directory (base.yaml): pass --conf-dir or set " + CONF_ENV
    )


def _packaged_conf() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("sparkfield.conf")
    locations = list(spec.submodule_search_locations or []) if spec else []
    locations.append(Path(__file__).resolve().parents[3] / "conf")  # a checkout's own conf
    for location in locations:
        if (Path(location) / "base.yaml").is_file():
            return Path(location)
    return None


# Hand-written conf and mapping files hold a few hundred values; aliases that expand beyond
# this are an alias bomb ("billion laughs"), refused before anything walks the data.
MAX_YAML_NODES = 100_000


def load_yaml(text: str, origin: str, error: type[ConfigError] = ConfigError) -> Any:
    """``yaml.safe_load`` of ``text``, refusing aliases that expand to more than
    :data:`MAX_YAML_NODES` values or refer to themselves; ``error`` (one line naming
    ``origin``) for those and for invalid YAML."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, origin, error, {}, set())
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(f"{origin}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise error(f"{origin}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, origin: str, error: type[ConfigError],
                   sizes: dict[int, int], open_: set[int]) -> int:
    """How many values ``node`` stands for once every alias is written out (shared nodes are
    counted once per use; each is measured once)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise error(f"{origin}: line {node.start_mark.line + 1}: a YAML alias refers to "
                    "the value that holds it")
    open_.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    else:
        children = []
    for child in children:
        size += _expanded_size(child, origin, error, sizes, open_)
        if size > MAX_YAML_NODES:
            raise error(f"{origin}: YAML aliases expand to more than {MAX_YAML_NODES:,} "
                        "values (an alias bomb?): write the values out instead")
    open_.discard(key)
    sizes[key] = size
    return size


def _read_yaml(path: Path) -> dict[str, Any]:
    data = load_yaml(path.read_text(), str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def job_file_path(conf_dir: Path, job: str) -> Path | None:
    for cand in (conf_dir / "jobs" / f"{job}.yaml", conf_dir / f"{job}.yaml"):
        if cand.is_file():
            return cand
    return None


@dataclass(frozen=True)
class SparkSettings:
    app_name: str
    master: str | None
    conf: dict[str, str]


@dataclass(frozen=True)
class Practices:
    sample_seed: int = 42
    storage_level: str = "MEMORY_AND_DISK_DESER"
    checkpoint_dir: str | None = None  # None: beside the output (see practices.py)
    local_checkpoint: bool = False
    skew_ratio_threshold: float = 4.0
    progress_interval_s: float = 30.0


@dataclass
class Config:
    """Merged configuration of one job run."""

    job_name: str
    profile: str
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def spark(self) -> SparkSettings:
        s = self.raw.get("spark", {})
        conf = {k: _spark_value(v) for k, v in (s.get("conf") or {}).items() if v is not None}
        return SparkSettings(s.get("app_name", "sparkfield"), s.get("master"), conf)

    @property
    def practices(self) -> Practices:
        p = self.raw.get("practices", {}) or {}
        fields = Practices.__dataclass_fields__
        for key in p:
            if key not in fields:
                near = difflib.get_close_matches(key, fields, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ConfigError(f"unknown key 'practices.{key}'{hint}")
        return Practices(**p)

    @property
    def job(self) -> dict[str, Any]:
        return self.raw.get("job", {})


def _spark_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def profile_names(profile: str | Sequence[str]) -> list[str]:
    """``"cluster,gpu"`` -> ["cluster", "gpu"]: profiles stack, applied in order."""
    names = profile.split(",") if isinstance(profile, str) else list(profile)
    names = [n.strip() for n in names if n and n.strip()]
    if not names:
        raise ConfigError("no profile given")
    return names


def load_config(
    job: str,
    profile: str | Sequence[str] = "local",
    conf_dir: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Merge ``base.yaml``, each profile in order (``"cluster,gpu"``: cluster.yaml, then
    gpu.yaml) and ``jobs/<job>.yaml`` (under key ``job``), then ``overrides`` (a nested dict,
    usually from flags). A ``None`` in the overrides sets that value to null, e.g.
    ``{"job": {"output": None}}`` writes nothing; leave a key out to keep the conf value."""
    root = find_conf_dir(conf_dir)
    merged = _read_yaml(root / "base.yaml")
    names = profile_names(profile)
    for name in names:
        prof = root / f"{name}.yaml"
        if not prof.is_file():
            known = sorted(p.stem for p in root.glob("*.yaml") if p.stem != "base")
            raise ConfigError(f"unknown profile {name!r}: no {prof} (profiles: "
                              f"{', '.join(known)})")
        merged = deep_merge(merged, _read_yaml(prof))
    job_file = job_file_path(root, job)
    job_conf = _read_yaml(job_file) if job_file else {}
    merged["job"] = deep_merge(merged.get("job", {}) or {}, job_conf)
    if overrides:
        merged = deep_merge(merged, overrides)
    return Config(job_name=job, profile=",".join(names), raw=merged)

