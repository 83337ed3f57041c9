"""One validated parameter schema per job: unknown keys, types, ranges, null overrides,
stacked profiles, and the schema agreeing with the conf files, the flags and the README."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sparkfield.core.conf import load_config
from sparkfield.core.errors import ConfigError
from sparkfield.core.param_docs import render_docs
from sparkfield.core.param_flags import APPENDED
from sparkfield.schemas import SCHEMAS
from tests.conftest import user_shell_env

ROOT = Path(__file__).resolve().parents[2]
GEO = SCHEMAS["coffee_shops"]


def job_module(job: str):
    spec = importlib.util.spec_from_file_location(f"job_{job}", ROOT / "jobs" / f"{job}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_unknown_key_names_the_nearest_valid_one():
    with pytest.raises(ConfigError, match=r"unknown key 'search.grid_stepm' \(did you mean "
                                          r"'search.grid_step_m'\?\)"):
        GEO.validate({"search": {"grid_stepm": 5}})
    with pytest.raises(ConfigError, match=r"unknown key 'serch' \(did you mean 'search'\?\)"):
        GEO.validate({"serch": {"top": 1}})


def test_every_problem_is_named_at_once_and_types_are_checked():
    with pytest.raises(ConfigError) as err:
        GEO.validate({"sample": 5, "search": {"top": "many", "refine": [5, -1]}})
    text = str(err.value)
    assert "sample must be in (0, 1], got 5" in text
    assert "search.top expected an integer, got 'many'" in text
    assert "search.refine must be > 0, got -1" in text
    with pytest.raises(ConfigError, match="search.top expected an integer, got 2.5"):
        GEO.validate({"search": {"top": 2.5}})
    with pytest.raises(ConfigError, match="search.top must not be null"):
        GEO.validate({"search": {"top": None}})


def test_validate_fills_defaults_and_coerces():
    out = GEO.validate({"search": {"grid_step_m": 5}})
    assert out["search"]["grid_step_m"] == 5.0 and isinstance(out["search"]["grid_step_m"], float)
    assert out["search"]["top"] == 10 and out["output"] == "out/coffee_shops"


def test_none_override_unsets_a_value(repo_root: Path):
    cfg = load_config("coffee_shops", "local", repo_root / "conf",
                      {"job": {"output": None, "search": {"tile_partitions": None}}})
    assert cfg.job["output"] is None
    assert GEO.validate(cfg.job)["output"] is None
    kept = load_config("coffee_shops", "local", repo_root / "conf", {"job": {}})
    assert kept.job["output"] == "out/coffee_shops"


def test_profiles_stack_in_order(repo_root: Path, tmp_path: Path):
    conf = repo_root / "conf"
    cluster = yaml.safe_load((conf / "cluster.yaml").read_text())["spark"]
    gpu = yaml.safe_load((conf / "gpu.yaml").read_text())["spark"]["conf"]
    only_cluster = sorted(set(cluster["conf"]) - set(gpu))
    assert only_cluster
    cfg = load_config("embed", "cluster,gpu", conf)
    assert cfg.profile == "cluster,gpu"
    assert cfg.spark.master == cluster["master"]  # from cluster
    for key in only_cluster:
        assert cfg.spark.conf[key] == str(cluster["conf"][key]), key
    for key in gpu:  # gpu, applied second, wins
        assert cfg.spark.conf[key] == str(gpu[key]), key
    # order: the later profile wins where both set a key
    (tmp_path / "base.yaml").write_text("spark: {conf: {a: base, b: base, c: base}}\n")
    (tmp_path / "one.yaml").write_text("spark: {conf: {a: one, b: one}}\n")
    (tmp_path / "two.yaml").write_text("spark: {conf: {b: two}}\n")
    stacked = load_config("x", "one, two", tmp_path).spark.conf
    assert stacked == {"a": "one", "b": "two", "c": "base"}
    assert load_config("x", "two,one", tmp_path).spark.conf["b"] == "one"
    with pytest.raises(ConfigError, match="unknown profile 'gpux'"):
        load_config("embed", "cluster,gpux", repo_root / "conf")


def test_a_mistyped_conf_dir_is_an_error_not_a_fall_back(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(ROOT)  # ./conf exists here and must not be used instead
    with pytest.raises(ConfigError, match="conf dir .*cnof not found"):
        load_config("coffee_shops", "local", tmp_path / "cnof")
    with pytest.raises(ConfigError, match="no base.yaml in conf dir"):
        load_config("coffee_shops", "local", tmp_path)


def test_unknown_practices_key_is_an_error(repo_root: Path):
    cfg = load_config("coffee_shops", "local", repo_root / "conf",
                      {"practices": {"sample_sed": 1}})
    with pytest.raises(ConfigError, match="practices.sample_sed.*did you mean 'sample_seed'"):
        cfg.practices  # noqa: B018


@pytest.mark.parametrize("job", sorted(SCHEMAS))
def test_conf_file_holds_exactly_the_schema_defaults(job):
    conf = yaml.safe_load((ROOT / "conf" / "jobs" / f"{job}.yaml").read_text())
    assert conf == SCHEMAS[job].defaults()


@pytest.mark.parametrize("job", sorted(SCHEMAS))
def test_flags_come_from_the_schema(job):
    parser = job_module(job).parser()
    flags = {a.option_strings[0]: a.dest for a in parser._actions if a.option_strings}
    schema = SCHEMAS[job]
    for p in schema.params:
        if p.flag:
            assert flags.get(p.flag) == p.dest, p.flag
    for a in schema.append_flags:  # repeatable: each appends to a list parameter
        assert flags.get(a.flag) == APPENDED, a.flag
    shared = {"-h", "--profile", "--conf-dir", "--run-date", "--log-level", "--remote"}
    assert set(flags) - shared == {p.flag for p in schema.params if p.flag} | {
        a.flag for a in schema.append_flags}


def test_docs_tables_are_generated_from_the_schemas():
    rendered = render_docs(ROOT, SCHEMAS.values())  # every job's table in exactly one file
    assert {p.relative_to(ROOT).as_posix() for p in rendered} == {
        f"docs/jobs/{job}.md" for job in SCHEMAS}
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.name}: parameter tables are stale: run `make param-tables`"


def test_make_param_tables_rewrites_a_stale_table():
    """The command the stale-table message names, as users run it: it puts the table back."""
    doc = ROOT / "docs" / "jobs" / "coffee_shops.md"
    fresh = doc.read_text(encoding="utf-8")
    row = next(line for line in fresh.splitlines() if line.startswith("| `output` |"))
    try:
        doc.write_text(fresh.replace(row, row.replace("atomically", "somehow")), "utf-8")
        # from a user's shell (no flags of a make running this test), with this interpreter
        # (the Makefile's default is the project's .venv)
        env = user_shell_env()
        res = subprocess.run(["make", "-s", "param-tables", f"PY={sys.executable}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout.splitlines() == ["updated docs/jobs/coffee_shops.md"]
        assert doc.read_text(encoding="utf-8") == fresh
    finally:
        doc.write_text(fresh, encoding="utf-8")


def test_a_table_in_two_files_or_none_is_an_error(tmp_path):
    schema = SCHEMAS["embed"]
    block = "<!-- params:embed -->\n<!-- /params:embed -->\n"
    (tmp_path / "docs").mkdir()
    with pytest.raises(ValueError, match="embed: 0"):
        render_docs(tmp_path, [schema])
    (tmp_path / "README.md").write_text(block)
    (tmp_path / "docs" / "embed.md").write_text(block)
    with pytest.raises(ValueError, match="embed: 2"):
        render_docs(tmp_path, [schema])
    (tmp_path / "README.md").write_text("no tables")
    (out,) = render_docs(tmp_path, [schema]).values()
    assert "| `model` | `--model` |" in out


@pytest.mark.parametrize("job", sorted(SCHEMAS))
@pytest.mark.parametrize("argv,message", [
    (["--sample", "0"], "sample must be in (0, 1], got 0"),
    (["--sample", "1.5"], "sample must be in (0, 1], got 1.5"),
    (["--max-reject-fraction", "-1"], "max_reject_fraction must be >= 0"),
])
def test_bad_values_exit_2_the_same_way_in_every_job(job, argv, message, capsys, tmp_path):
    code = job_module(job).main([*argv, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,message", [
    (["--run-date", "2024-01-01", "--run-date", "2024-01-02"],
     "--run-date given more than once"),
    (["--log-level", "LOUD"], "'LOUD' is not one of DEBUG"),
    (["--run-date", "yesterday"], "expected YYYY-MM-DD"),
])
def test_flag_mistakes_exit_2_before_any_work(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        job_module("coffee_shops").main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_mistyped_conf_dir_flag_exits_2(tmp_path, capsys):
    code = job_module("coffee_shops").main(["--conf-dir", str(tmp_path / "cnof")])
    assert code == 2
    assert "not found (--conf-dir)" in capsys.readouterr().err


@pytest.mark.parametrize("job,conf,message", [
    ("coffee_shops", {"search": {"grid_stepm": 5}}, "'search.grid_stepm' (did you mean "
                                                    "'search.grid_step_m'?)"),
    ("bag_of_words", {"vocab_sise": 5}, "'vocab_sise' (did you mean 'vocab_size'?)"),
    ("bag_of_words", {"fetch": {"delay": 5}}, "'fetch.delay' (did you mean 'fetch.delay_s'?)"),
    ("embed", {"neighbors": {"methd": "lsh"}}, "(did you mean 'neighbors.method'?)"),
    ("event_log", {"maping": "x.yaml"}, "'maping' (did you mean 'mapping'?)"),
    ("process_mining", {"columns": {"cse": "id"}}, "(did you mean 'columns.case'?)"),
])
def test_unknown_keys_are_errors_in_every_job(job, conf, message):
    with pytest.raises(ConfigError, match="unknown key") as err:
        SCHEMAS[job].validate(conf)
    assert message in str(err.value)


def test_a_misspelt_choice_is_named_with_the_nearest_valid_one():
    with pytest.raises(ConfigError, match=r"neighbors.method must be one of exact, lsh, got "
                                          r"'lhs' \(did you mean 'lsh'\?\)"):
        SCHEMAS["embed"].validate({"neighbors": {"method": "lhs"}})


def test_dates_from_yaml_are_accepted_as_timestamps():
    conf = yaml.safe_load("min_timestamp: 2001-01-01\n")
    assert SCHEMAS["process_mining"].validate(conf)["min_timestamp"] == "2001-01-01"


@pytest.mark.parametrize("argv,message", [
    (["--device", "tpu"], "device 'tpu' is not valid here"),
    (["--device", "cuda"], "torch sees no CUDA device"),
    (["--batch-size", "0"], "batch_size must be >= 1"),
])
def test_embed_environment_and_device_checked_before_spark(argv, message, capsys, monkeypatch,
                                                           tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = job_module("embed").main(["--input", str(tmp_path / "in.parquet"), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err


def test_missing_model_folder_exits_2_naming_it(capsys, tmp_path):
    code = job_module("embed").main(["--input", "x.parquet", "--model", str(tmp_path / "m")])
    assert code == 2
    assert f"model folder not found: {tmp_path / 'm'}" in capsys.readouterr().err


def test_selector_with_extract_main_is_an_error(capsys):
    code = job_module("bag_of_words").main(["--html-dir", "x", "--extract", "main",
                                            "--selector", "div"])
    assert code == 2
    assert "--selector applies to --extract selector" in capsys.readouterr().err


def test_selector_alone_implies_extract_selector(repo_root):
    module = job_module("bag_of_words")
    args = module.parser().parse_args(["--html-dir", "x", "--selector", "div"])
    assert module.overrides(args)["job"] == {"source": {"html_dir": "x"}, "selector": "div",
                                             "extract": "selector"}


def test_parse_gives_typed_sections_with_the_schema_defaults():
    import dataclasses

    from sparkfield.schemas import SCHEMAS

    def flatten(obj, prefix=""):
        flat = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                flat.update(flatten(value, f"{prefix}{f.name}."))
            else:
                flat[prefix + f.name] = value
        return flat

    for name, schema in SCHEMAS.items():
        p = schema.parse({})
        flat = flatten(p)
        assert flat == {k: v.default for k, v in schema.by_key.items()}, name
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.output = "elsewhere"
    geo = SCHEMAS["coffee_shops"].parse({"search": {"top": 3, "grid_step_m": 5}})
    assert (geo.search.top, geo.search.grid_step_m, geo.inputs.crimes) == (3, 5.0, None)
    assert type(geo.search).__name__ == "CoffeeShopsSearchParams"
    with pytest.raises(ConfigError, match="unknown key 'search.tops'"):
        SCHEMAS["coffee_shops"].parse({"search": {"tops": 3}})


def test_parsed_parameters_pickle_by_job_and_section(tmp_path):
    """Executors get them by pickling, in a process that has not imported the schema."""
    import pickle
    import subprocess
    import sys

    import cloudpickle

    from sparkfield.text.params import BAG_OF_WORDS

    p = BAG_OF_WORDS.parse({"fetch": {"delay_s": 0.5}})
    assert pickle.loads(pickle.dumps(p)) == p
    (tmp_path / "p.pkl").write_bytes(cloudpickle.dumps(p.fetch))
    code = ("import pickle, sys; q = pickle.load(open(sys.argv[1], 'rb')); "
            "print(type(q).__name__, q.delay_s)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.pkl")],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["BagOfWordsFetchParams", "0.5"]


def test_the_jobs_schemas_entry_points_and_runnable_jobs_are_the_same_set():
    from sparkfield.__main__ import job_names

    entry_points = {p.stem for p in (ROOT / "jobs").glob("*.py")}
    assert set(SCHEMAS) == entry_points == set(job_names())
