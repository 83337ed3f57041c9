from pathlib import Path

import pytest

from sparkfield.core.conf import deep_merge, load_config
from sparkfield.core.errors import ConfigError


def test_deep_merge_overlays_nested_keys_without_touching_others():
    base = {"spark": {"conf": {"a": "1", "b": "2"}, "master": None}, "x": 1}
    out = deep_merge(base, {"spark": {"conf": {"b": "3"}, "master": "local[2]"}})
    assert out == {"spark": {"conf": {"a": "1", "b": "3"}, "master": "local[2]"}, "x": 1}
    assert base["spark"]["conf"]["b"] == "2"  # input not mutated


def test_profile_and_job_files_then_flags(repo_root: Path):
    cfg = load_config("coffee_shops", "local", repo_root / "conf",
                      {"job": {"search": {"top": 3}}})
    assert cfg.spark.master == "local[*]"
    assert cfg.spark.conf["spark.sql.adaptive.skewJoin.enabled"] == "true"
    assert cfg.job["search"]["top"] == 3  # flag wins
    assert cfg.job["search"]["grid_step_m"] == 10  # a key left out keeps the conf value
    cluster = load_config("coffee_shops", "cluster", repo_root / "conf")
    assert cluster.spark.master.startswith("spark://")
    assert cluster.spark.conf["spark.sql.shuffle.partitions"] == "200"


def test_unknown_profile_is_a_clear_error(repo_root: Path):
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        load_config("coffee_shops", "nope", repo_root / "conf")


def test_flattened_conf_as_shipped_with_spark_submit_files(tmp_path: Path, repo_root: Path):
    for name in ("base.yaml", "local.yaml"):
        (tmp_path / name).write_text((repo_root / "conf" / name).read_text())
    (tmp_path / "coffee_shops.yaml").write_text("search: {top: 7}\n")
    cfg = load_config("coffee_shops", "local", tmp_path)
    assert cfg.job["search"]["top"] == 7


def test_no_secrets_in_conf(repo_root: Path):
    text = "\n".join(p.read_text() for p in (repo_root / "conf").rglob("*.yaml")).lower()
    assert "password:" not in text and "secret:" not in text
