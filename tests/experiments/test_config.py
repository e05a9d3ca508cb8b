"""Sweep configs: grids, joint keys, lr grids, seeds, run ids, and one-line errors naming the key."""

import math
import tomllib

import numpy as np
import pytest

from echosim.experiments.schema import PAPER_LRS, ConfigError, lr_grid
from echosim.experiments.config import default_config, load_config, parse_config

BASE = {
    "problem": {"kind": "logistic", "dim": 3},
    "optimizer": {"lr": 0.5, "batch_size": 4},
    "sweep": {"n_batches": 20},
}


def cfg(**sections):
    """BASE with sections replaced/extended (a key set to None is removed)."""
    data = {k: dict(v) for k, v in BASE.items()}
    for name, table in sections.items():
        if table is None:
            data.pop(name, None)
            continue
        data.setdefault(name, {})
        for k, v in table.items():
            if v is None:
                data[name].pop(k, None)
            else:
                data[name][k] = v
    return data


# --------------------------------------------------------------------------- learning-rate grids


def test_paper_grid_has_61_values_from_001_to_10_with_ratio_10_to_the_1_over_20():
    lrs = np.array(PAPER_LRS)
    assert len(lrs) == 61
    assert lrs[0] == pytest.approx(0.01, rel=1e-14) and lrs[-1] == pytest.approx(10.0, rel=1e-14)
    np.testing.assert_allclose(lrs[1:] / lrs[:-1], 10 ** (1 / 20), rtol=1e-12)
    assert parse_config(cfg(optimizer={"lr": "paper"})).runs.__len__() == 61


def test_lr_table_forms():
    assert len(lr_grid(0.1, 10, per_decade=10)) == 21
    np.testing.assert_allclose(lr_grid(0.01, 1, num=3), [0.01, 0.1, 1.0], rtol=1e-12)
    c = parse_config(cfg(optimizer={"lr": {"start": 0.1, "stop": 1.0, "num": 4}}))
    assert sorted(r.optimizer["lr"] for r in c.runs) == pytest.approx(list(np.geomspace(0.1, 1.0, 4)))


# --------------------------------------------------------------------------- grids


def test_lists_multiply_and_repetitions_multiply():
    c = parse_config(cfg(optimizer={"lr": [0.1, 0.2, 0.3], "echo": [1, 2]}, sweep={"repetitions": 2}))
    assert len(c.runs) == 12
    assert set(c.axes) == {"optimizer.lr", "optimizer.echo"}
    assert len({r.run_id for r in c.runs}) == 12


def test_joint_keys_vary_together_in_a_section_and_in_joint():
    a = parse_config(cfg(optimizer={"batch_size": None, "echo": [1, 2],
                                    "batch_size, sweep.n_batches": [[4, 30], [16, 10]]},
                         sweep={"n_batches": None}))
    b = parse_config(cfg(optimizer={"batch_size": None, "echo": [1, 2]}, sweep={"n_batches": None},
                         joint={"optimizer.batch_size, sweep.n_batches": [[4, 30], [16, 10]]}))
    for c in (a, b):
        pairs = {(r.optimizer["batch_size"], r.run["n_batches"]) for r in c.runs}
        assert pairs == {(4, 30), (16, 10)}
        assert len(c.runs) == 4
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]


def test_keys_that_do_not_apply_are_dropped_and_duplicates_merged():
    c = parse_config(cfg(optimizer={"method": ["echoed_gd", "echoed_prox"], "lam": [0.5, 1.0]}))
    methods = [r.optimizer["method"] for r in c.runs]
    assert methods.count("echoed_gd") == 1 and methods.count("echoed_prox") == 2
    assert "lam" not in c.runs[methods.index("echoed_gd")].optimizer
    assert "duplicate" in c.describe()


def test_service_time_tables_can_hold_grids():
    c = parse_config(cfg(pipeline={"arrival": {"kind": "gamma", "mean": [4.0, 8.0], "cv": 0.5}}))
    names = sorted(r.pipeline["arrival_name"] for r in c.runs)
    assert names == ["Gamma(mean=4.0, cv=0.5)", "Gamma(mean=8.0, cv=0.5)"]
    c = parse_config(cfg(pipeline={"arrival": [2.0, {"kind": "exponential", "mean": 3.0}]}))
    assert sorted(r.pipeline["arrival_mean"] for r in c.runs) == [2.0, 3.0]


def test_echo_goes_to_the_fixed_pipeline_and_is_dropped_for_greedy_and_sync():
    c = parse_config(cfg(pipeline={"arrival": 4.0, "policy": ["fixed", "greedy", "sync"]},
                         optimizer={"echo": [1, 2]}))
    by_policy = {}
    for r in c.runs:
        by_policy.setdefault(r.pipeline["policy"], []).append(r)
    assert len(by_policy["fixed"]) == 2 and len(by_policy["greedy"]) == 1 and len(by_policy["sync"]) == 1
    assert {r.echo for r in by_policy["fixed"]} == {1, 2}
    assert by_policy["greedy"][0].echo is None and "optimizer.echo" not in by_policy["greedy"][0].params()
    assert by_policy["sync"][0].echo == 1
    assert all("echo" not in r.optimizer and "echo" not in r.pipeline for r in c.runs)  # K has one owner


def test_the_embedded_default_sweep_is_valid_and_figure2_shaped():
    c = default_config()
    Bs = {r.optimizer["batch_size"] for r in c.runs}
    Ks = {r.echo for r in c.runs}
    assert len(Bs) == 2 and Ks == {1, 2, 4, 8, 16, 32}
    assert all(r.pipeline["policy"] == "fixed" for r in c.runs)
    assert c.settings["rtol"] == 0.01 and c.settings["rule"] == "hold" and c.settings["window"] == 1
    assert all(r.run["log_every"] == 1 and r.run["log_unit"] == "batch" for r in c.runs)  # T in whole batches
    lrs = sorted({r.optimizer["lr"] for r in c.runs})
    ratio = 2 ** 0.5  # closed under doubling: K and 2K are offered the same products K·lr
    np.testing.assert_allclose(np.diff(np.log(lrs)), np.log(ratio))


def test_hold_applies_only_to_the_hold_rule():
    with pytest.raises(ConfigError, match="sweep.hold: applies only"):
        parse_config(cfg(sweep={"rule": "first", "hold": 5}))
    assert parse_config(cfg(sweep={"hold": 5})).settings["hold"] == 5


# --------------------------------------------------------------------------- seeds and ids


def test_seeds_come_from_data_axes_not_from_k_lr_method_or_grid_position():
    c = parse_config(cfg(optimizer={"lr": [0.1, 0.2], "echo": [1, 2], "method": ["echoed_gd", "echoed_sgd"],
                                    "batch_size": [4, 8]},
                         pipeline={"arrival": 4.0, "policy": "fixed"}, sweep={"repetitions": 2}))
    by_key = {}
    for r in c.runs:
        by_key.setdefault((r.optimizer["batch_size"], r.repetition), set()).add(r.seed)
    assert all(len(s) == 1 for s in by_key.values())  # common random numbers across K, lr, method
    assert len({next(iter(s)) for s in by_key.values()}) == 4  # B and repetition change the data
    pipe = {}
    for r in c.runs:
        pipe.setdefault(r.repetition, set()).add(r.pipeline_seed)
    assert all(len(s) == 1 for s in pipe.values()) and len(pipe) == 2
    # the same runs, listed in another order, keep their seeds and ids
    d = parse_config(cfg(optimizer={"lr": [0.2, 0.1], "echo": [2, 1], "method": ["echoed_sgd", "echoed_gd"],
                                    "batch_size": [8, 4]},
                         pipeline={"arrival": 4.0, "policy": "fixed"}, sweep={"repetitions": 2}))
    assert {(r.run_id, r.seed, r.pipeline_seed) for r in c.runs} == {(r.run_id, r.seed, r.pipeline_seed)
                                                                     for r in d.runs}


def test_base_seed_and_any_parameter_change_the_run_id_and_config_hash():
    a = parse_config(cfg())
    assert parse_config(cfg()).runs[0].run_id == a.runs[0].run_id
    for change in ({"sweep": {"seed": 1}}, {"optimizer": {"lr": 0.25}}, {"problem": {"dim": 4}}):
        b = parse_config(cfg(**change))
        assert b.runs[0].run_id != a.runs[0].run_id
        assert b.config_hash != a.config_hash and b.default_out() != a.default_out()
    # the analysis target changes the config hash (a new output dir) but not the run ids
    t = parse_config(cfg(sweep={"rtol": 0.02}))
    assert t.runs[0].run_id == a.runs[0].run_id and t.config_hash != a.config_hash


def test_overrides_use_toml_values_and_quoted_joint_keys():
    c = parse_config(cfg(optimizer={"batch_size": None}, sweep={"n_batches": None}),
                     overrides=["optimizer.echo=[1,2]", "sweep.name=demo",
                                'joint."optimizer.batch_size, sweep.n_batches"=[[4, 10]]'])
    assert c.name == "demo" and len(c.runs) == 2


def test_load_config_reads_files_and_resolves_relative_paths(tmp_path):
    np.savez(tmp_path / "d.npz", X=np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.2]]),
             y=np.array([1.0, -1.0, 1.0, -1.0]))
    (tmp_path / "c.toml").write_text('[problem]\nkind = "dataset"\npath = "d.npz"\nl2 = 0.1\n'
                                     '[optimizer]\nlr = 0.5\nbatch_size = 2\n[sweep]\nn_batches = 5\n')
    c = load_config(tmp_path / "c.toml")
    assert c.runs[0].problem["path"] == str(tmp_path / "d.npz") and c.name == "c"


# --------------------------------------------------------------------------- errors


NO_B_T = {"optimizer": {"batch_size": None}, "sweep": {"n_batches": None}}
BAD = [
    ({"bogus": {"a": 1}}, "bogus"),
    ({"optimizer": {"lrr": 0.1}}, "optimizer.lrr"),
    ({"optimizer": {"lr": [0.1, 0.2, -1.0]}}, "optimizer.lr[2]"),
    ({"optimizer": {"batch_size": "four"}}, "optimizer.batch_size"),
    ({"optimizer": {"batch_size": [4, 0]}}, "optimizer.batch_size[1]"),
    ({"optimizer": {"batch_size": 4.0}}, "optimizer.batch_size"),
    ({"optimizer": {"lr": None}}, "optimizer.lr"),
    ({"optimizer": {"lr": {"start": 0.1}}}, "optimizer.lr.stop"),
    ({"optimizer": {"lr": {"start": 1, "stop": 10, "per_decad": 3}}}, "optimizer.lr"),
    ({"optimizer": {"lr": []}}, "optimizer.lr"),
    ({"optimizer": {"echo": 2.5}}, "optimizer.echo"),
    ({"optimizer": {"echo": [1, 0.5]}}, "optimizer.echo[1]"),
    ({"optimizer": {"method": "adam"}}, "optimizer.method"),
    ({"optimizer": {"lam": 2.0}}, "optimizer.lam"),
    ({"optimizer": {"method": "echoed_sgd", "sub_batch": 8, "replace": False}}, "optimizer.sub_batch"),
    ({"optimizer": {"method": "minibatch_sgd"}, "pipeline": {"arrival": 3.0, "policy": "greedy"}},
     "optimizer.method"),
    ({"problem": {"dim": 0}}, "problem.dim"),
    ({"problem": {"noise_std": 0.1}}, "problem.noise_std"),
    ({"problem": {"kind": "quadratic"}}, "problem.kind"),
    ({"problem": {"dim": None}}, "problem.dim"),
    ({"sweep": {"repetitions": [1, 2]}}, "sweep.repetitions"),
    ({"sweep": {"rtol": 0.01, "atol": 0.1}}, "sweep.atol"),
    ({"sweep": {"n_batches": None}}, "sweep.n_batches"),
    ({"sweep": {"n_batches": None, "time_budget": 10.0}}, "sweep.time_budget"),
    ({"sweep": {"tune_by": "time"}}, "sweep.tune_by"),
    ({"sweep": None}, "sweep"),
    ({"pipeline": {"arrival": -1.0}}, "pipeline.arrival"),
    ({"pipeline": {"arrival": {"kind": "gamma", "mean": 2.0}}}, "pipeline.arrival"),
    ({"pipeline": {"arrival": {"kind": "gamma", "mean": 2.0, "cv": 0.5, "sd": 1}}}, "pipeline.arrival"),
    ({"pipeline": {"arrival": {"kind": "weibull", "mean": 2.0}}}, "pipeline.arrival"),
    ({"pipeline": {"arrival": 2.0, "echo": 4}}, "pipeline.echo"),
    ({"pipeline": {"arrival": 2.0, "workers": 0}}, "pipeline.workers"),
    ({"pipeline": {"workers": 2}}, "pipeline.arrival"),
    ({"pipeline": {"arrival": 2.0, "max_echo": 4}}, "pipeline.max_echo"),
    ({"joint": {"optimizer.batch_size, sweep.n_batches": [[4, 10], [8]]}, **NO_B_T}, "[1]"),
    ({"joint": {"optimizer.batch_size, sweep.n_batches": [[4, 10], [8, 0]]}, **NO_B_T}, "[1][1]"),
    ({"joint": {"optimizer.batchsize, sweep.n_batches": [[4, 10]]}, **NO_B_T}, "optimizer.batchsize"),
    ({"joint": {"optimizer.batch_size": [[4]]}}, "joint"),
    ({"optimizer": {"batch_size": 4, "batch_size, sweep.n_batches": [[4, 10]]}}, "optimizer.batch_size"),
    ({"problem": {"kind": "dataset", "dim": None, "path": "/nonexistent/data.csv"}}, "problem.path"),
]


@pytest.mark.parametrize("change, key", BAD, ids=[k for _, k in BAD])
def test_bad_configs_raise_one_line_naming_the_key(change, key):
    with pytest.raises(ConfigError) as info:
        parse_config(cfg(**change))
    msg = str(info.value)
    assert "\n" not in msg
    assert key in msg, msg


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[optimizer\nlr = 1\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError):
        load_config(binary)


def test_bad_overrides_name_the_problem():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_config(cfg(), overrides=["optimizer.lr"])
    with pytest.raises(ConfigError, match="dotted path"):
        parse_config(cfg(), overrides=["lr=0.1"])


def test_errors_from_constructors_carry_the_grid_element():
    # the Pipeline rejects a shuffle buffer for non-example policies; the message names where it came from
    with pytest.raises(ConfigError, match=r"optimizer.echo\[1\]") as info:
        parse_config(cfg(optimizer={"echo": [1, 2.5]}))
    assert "\n" not in str(info.value)


def test_every_example_file_is_a_valid_config():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(root.glob("*.toml"))
    assert files, "examples/*.toml missing"
    for f in files:
        data = tomllib.loads(f.read_text())
        if data.get("problem", {}).get("kind") == "dataset" and "name" in data["problem"]:
            if data["problem"]["name"] in ("covertype", "mnist"):
                continue  # downloads on first use
        c = load_config(f)
        assert len(c.runs) >= 1 and math.isfinite(c.settings["window"])


def test_every_schema_key_is_documented_in_docs_sweep_md():
    from pathlib import Path

    from echosim.experiments.schema import FIELDS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "sweep.md").read_text()
    for section, fields in FIELDS.items():
        part = doc.split(f"### `[{section}]`", 1)[1].split("\n### ", 1)[0]
        for key in fields:
            assert f"| `{key}` |" in part, f"{section}.{key} is not in the [{section}] table of docs/sweep.md"
    from echosim.training.methods import METHODS

    methods_row = doc.split("| `method` |", 1)[1].split("\n", 1)[0]
    for name in METHODS:
        assert f'`"{name}"`' in methods_row, f"method {name} is not listed in docs/sweep.md"
