"""Conf YAML refuses alias bombs, and a time-zone parameter is checked as Spark reads it, both
before any Spark work, with one error line and exit 2."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from sparkfield.core.conf import load_config, load_yaml
from sparkfield.core.errors import ConfigError
from sparkfield.core.timezones import timezone_problem
from sparkfield.schemas import SCHEMAS
from tests.conftest import job_module

ROOT = Path(__file__).resolve().parents[2]

# ten levels of ten aliases: 10**9 values once written out, a few hundred bytes of YAML
BOMB = "[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol], " + ", ".join(
    f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)) + "]"


def _conf_copy(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    return conf


def test_alias_bomb_in_a_conf_file_is_refused_at_once(tmp_path):
    conf = _conf_copy(tmp_path)
    (conf / "local.yaml").write_text((conf / "local.yaml").read_text()
                                     + f"    spark.bomb: {BOMB}\n")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"local.yaml: YAML aliases expand to more than "):
        load_config("process_mining", "local", conf).spark  # noqa: B018 (the values are used)
    assert time.monotonic() - start < 5


def test_alias_bomb_in_a_job_conf_exits_2_with_one_line(tmp_path, capsys):
    conf = _conf_copy(tmp_path)
    job = conf / "jobs" / "process_mining.yaml"
    job.write_text(job.read_text().replace("timezone: UTC ", f"timezone: {BOMB} "))
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", "x.xes",
                                              "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "alias" in err


def test_a_few_aliases_and_merge_keys_still_load():
    text = "base: &base {a: 1, b: [1, 2]}\nother: {<<: *base, c: 3}\nagain: *base\n"
    assert load_yaml(text, "x.yaml") == {"base": {"a": 1, "b": [1, 2]},
                                         "other": {"a": 1, "b": [1, 2], "c": 3},
                                         "again": {"a": 1, "b": [1, 2]}}


def test_an_alias_that_holds_itself_is_refused():
    with pytest.raises(ConfigError, match="x.yaml: line 1: a YAML alias refers to the value"):
        load_yaml("loop: &loop [1, *loop]\n", "x.yaml")


def test_invalid_yaml_is_one_line():
    with pytest.raises(ConfigError) as err:
        load_yaml("a: [1, 2\nb: 3\n", "x.yaml")
    assert str(err.value).startswith("x.yaml: invalid YAML: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("zone", ["UTC", "America/Sao_Paulo", "Europe/Berlin", "+02:00",
                                  "-05:30", "+2:00", "+0200", "+02", "Z", "GMT", "GMT+2",
                                  "UTC-03:00", "UT", "EST", "PST", "Etc/GMT+2", "+18:00"])
def test_time_zones_spark_takes(zone):
    assert timezone_problem(zone) is None


@pytest.mark.parametrize("zone, message", [
    ("Mars/Olympus", "'Mars/Olympus' is not a time zone (a region such as"),
    ("America/SaoPaulo", "(did you mean 'America/Sao_Paulo'?)"),
    ("utc", "(did you mean 'UTC'?)"),
    ("", "'' is not a time zone"),
    ("+18:01", "'+18:01' is not a valid offset"),
    ("+02:60", "'+02:60' is not a valid offset"),
    ("UTC+", "'UTC+' is not a valid offset"),
    ("../../etc/passwd", "is not a time zone"),
])
def test_time_zones_spark_refuses(zone, message):
    assert message in (timezone_problem(zone) or "")


def test_a_time_zone_parameter_is_checked():
    schema = SCHEMAS["process_mining"]
    assert schema.validate({"timezone": "America/Sao_Paulo"})["timezone"] == "America/Sao_Paulo"
    assert schema.validate({"timezone": "+02:00"})["timezone"] == "+02:00"
    with pytest.raises(ConfigError, match=r"timezone 'Europe/Pariss' is not a time zone "
                                          r"\(did you mean 'Europe/Paris'\?\)"):
        schema.validate({"timezone": "Europe/Pariss"})
    with pytest.raises(ConfigError, match="timezone expected a time zone as text, got 120"):
        schema.validate({"timezone": 120})  # YAML reads an unquoted 2:00 as 120


def test_a_bad_time_zone_in_the_job_conf_exits_2_before_spark(tmp_path, capsys):
    conf = _conf_copy(tmp_path)
    job = conf / "jobs" / "process_mining.yaml"
    job.write_text(job.read_text().replace("timezone: UTC ", "timezone: Mars/Olympus "))
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", "x.xes",
                                              "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "timezone 'Mars/Olympus' is not a time zone" in err
    assert not (tmp_path / "out").exists()


def test_a_bad_session_time_zone_exits_2_before_spark(tmp_path, capsys):
    conf = _conf_copy(tmp_path)
    base = conf / "base.yaml"
    base.write_text(base.read_text().replace("spark.sql.session.timeZone: UTC",
                                             "spark.sql.session.timeZone: Mars/Olympus"))
    code = job_module("process_mining").main(["--conf-dir", str(conf), "--log", "x.xes",
                                              "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: spark.sql.session.timeZone: ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
