"""The method and loss tables: every row is whole, and every layer reads them (no shadow lists)."""

import math

import numpy as np
import pytest

import theory
from echosim.training import losses, methods
from echosim.training.methods import METHODS, EchoedAdam, EchoedAdamW, EchoedHeavyBall, EchoedNesterov


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_row_is_whole_and_its_spec_round_trips_through_its_config(name):
    from echosim.training.kernel import UPDATES
    from tests.naive import STEPS

    row = METHODS[name]
    assert row.spec.name == name and row.code in UPDATES and name in STEPS
    spec = row.spec(lr=0.1)
    assert spec.method is row
    assert set(row.fields) <= set(methods.HYPER_FIELDS)
    assert row.build(0.1, spec.config()) == spec  # config keys → spec → config keys
    assert row.iterate in ("last", "avg", "end_avg")
    for fn in (row.bound, row.lr_rule):
        assert fn is None or callable(getattr(theory, fn))
    for state, start in row.state:
        assert start in ("w0", "zero")
    assert spec.kernel_hyper().shape == (len(row.hyper),) and set(row.hyper) <= set(row.fields)
    assert row.lr_grid is None or row.lr_grid[0] < row.lr_grid[1]


def test_a_row_whose_spec_gives_other_hyper_parameters_is_refused():
    import dataclasses

    adam = METHODS["echoed_adam"]
    with pytest.raises(ValueError, match="kernel_hyper\\(\\) gives 3 floats, its row's hyper names 2"):
        methods.check_rows({"echoed_adam": dataclasses.replace(adam, hyper=("beta1", "beta2"))})
    with pytest.raises(ValueError, match="not its config keys"):
        methods.check_rows({"echoed_adam": dataclasses.replace(adam, hyper=("beta1", "beta2", "lam"))})


def test_every_method_is_exported_where_the_optimizers_are():
    import echosim
    import echosim.training

    for row in METHODS.values():
        name = row.spec.__name__
        assert getattr(echosim, name) is row.spec and name in echosim.__all__
        assert getattr(echosim.training, name) is row.spec and name in echosim.training.__all__


def test_heavy_ball_adam_sub_batch_sgd_and_constant_momentum_nesterov_have_no_bound():
    for name in ("echoed_heavy_ball", "echoed_adam", "echoed_sgd"):
        assert METHODS[name].bound_for({}) is None
    assert METHODS["echoed_nesterov"].bound_for({}) == "echoed_agd_bound"
    assert METHODS["echoed_nesterov"].bound_for({"momentum": 0.5}) is None
    assert METHODS["echoed_gd"].bound_for({}) == "echoed_gd_bound"
    assert METHODS["echoed_heavy_ball"].lr_rule is None and METHODS["echoed_adam"].lr_rule is None


def test_the_users_hyper_parameters_carry_over_from_torch():
    assert EchoedHeavyBall(0.1).momentum == 0.9
    adam = EchoedAdam(1e-3)
    assert (adam.betas, adam.eps) == ((0.9, 0.999), 1e-8)
    assert adam.config() == {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    assert repr(EchoedAdam(0.01, betas=(0.8, 0.99))) == "EchoedAdam(lr=0.01, betas=(0.8, 0.99), eps=1e-08)"
    assert EchoedNesterov(0.1).kernel_hyper()[0] == -1.0
    adamw = EchoedAdamW(1e-3)  # torch.optim.AdamW's defaults
    assert (adamw.betas, adamw.eps, adamw.weight_decay) == ((0.9, 0.999), 1e-8, 1e-2)
    assert adamw.config() == {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2}
    np.testing.assert_array_equal(EchoedAdamW(0.1, weight_decay=0.5).kernel_hyper(), [0.9, 0.999, 1e-8, 0.5])
    with pytest.raises(ValueError, match="weight_decay"):
        EchoedAdamW(0.1, weight_decay=-1.0)
    with pytest.raises(ValueError, match="eps"):
        EchoedAdamW(0.1, eps=0.0)


def test_the_config_schema_reads_the_method_table():
    from echosim.experiments.schema import FIELDS

    opt = FIELDS["optimizer"]
    assert opt["method"].choices == tuple(METHODS)
    for key in methods.HYPER_FIELDS:
        assert set(opt[key].applies) == {m for m, row in METHODS.items() if key in row.fields}
    assert opt["momentum"].default == {"echoed_nesterov": "nesterov", "echoed_heavy_ball": 0.9}
    assert opt["beta2"].default == 0.999


def test_sweep_configs_build_heavy_ball_and_adam_with_their_defaults_and_refuse_a_theory_step():
    from echosim.experiments.config import parse_config
    from echosim.experiments.schema import ConfigError
    from echosim.experiments.specs import build_optimizer

    base = {"problem": {"kind": "logistic", "dim": 3}, "sweep": {"n_batches": 5, "window": 1}}
    conf = parse_config({**base, "optimizer": {"method": ["echoed_heavy_ball", "echoed_adam"], "lr": 0.1,
                                               "batch_size": 4, "echo": 2}})
    opts = [build_optimizer(r.optimizer) for r in conf.runs]
    assert opts == [EchoedHeavyBall(0.1, momentum=0.9), EchoedAdam(0.1)]
    assert conf.runs[1].optimizer == {"method": "echoed_adam", "lr": 0.1, "batch_size": 4, "beta1": 0.9,
                                      "beta2": 0.999, "eps": 1e-8}
    with pytest.raises(ConfigError, match="momentum"):
        parse_config({**base, "optimizer": {"method": "echoed_heavy_ball", "momentum": "nesterov", "lr": 0.1,
                                            "batch_size": 4}})
    with pytest.raises(ConfigError, match="no bound"):
        parse_config({**base, "optimizer": {"method": "echoed_adam", "lr": "theory", "batch_size": 4}})
    with pytest.raises(ConfigError, match="applies only when optimizer.method is 'echoed_adam'"):
        parse_config({**base, "optimizer": {"method": "echoed_gd", "beta1": 0.5, "lr": 0.1, "batch_size": 4}})
    conf = parse_config({**base, "optimizer": {"method": "echoed_adamw", "weight_decay": [0.0, 0.1], "lr": 0.1,
                                               "batch_size": 4}})
    assert [build_optimizer(r.optimizer) for r in conf.runs] == [EchoedAdamW(0.1, weight_decay=0.0),
                                                                 EchoedAdamW(0.1, weight_decay=0.1)]
    with pytest.raises(ConfigError, match="applies only when optimizer.method is 'echoed_adamw'"):
        parse_config({**base, "optimizer": {"method": "echoed_adam", "weight_decay": 0.1, "lr": 0.1, "batch_size": 4}})


def test_the_loss_table_has_the_only_codes_and_an_unknown_name_is_refused():
    codes = [row.code for row in losses.LOSSES.values()]
    assert len(set(codes)) == len(codes) == len(losses.LOSSES)
    assert losses.loss_code("squared") == losses.SQUARED and losses.loss_code("softmax") == losses.SOFTMAX
    allowed = ", ".join(map(repr, losses.LOSSES))
    with pytest.raises(ValueError, match=f"loss must be one of {allowed}; got 'hinge'"):
        losses.loss_code("hinge")


def test_margin_loss_formulas_agree_with_their_derivatives():
    from echosim.training import losses as dataset_risk

    z = np.linspace(-30.0, 30.0, 61) + 0.125  # off the integers: the Huber loss's kinks at z − y = ±1
    h = 1e-6
    for name, row in losses.LOSSES.items():
        if not row.margin:
            continue
        code = row.code
        for y in (-1.0, 1.0, 0.3):
            if row.labels == "−1 or +1" and y == 0.3:
                continue
            value = np.array([dataset_risk.value(v, y, code) for v in z])
            deriv = np.array([dataset_risk.deriv(v, y, code) for v in z])
            curv = np.array([dataset_risk.curvature(v, y, code) for v in z])
            numeric = (np.array([dataset_risk.value(v + h, y, code) for v in z]) - value) / h
            np.testing.assert_allclose(deriv, numeric, rtol=1e-4, atol=1e-5)
            numeric2 = (np.array([dataset_risk.deriv(v + h, y, code) for v in z]) - deriv) / h
            np.testing.assert_allclose(curv, numeric2, rtol=1e-4, atol=1e-5)
    assert math.isnan(dataset_risk.value(0.0, 1.0, 7))  # an unknown code is never another loss
    assert math.isnan(dataset_risk.deriv(0.0, 1.0, 7))



def test_the_planners_grids_read_the_rows():
    from echosim.planner.simulated import lr_grid_for, method_lr_grid
    from echosim.training.problems import Dataset

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    lam = float(np.linalg.eigvalsh(X.T @ X / 40).max())
    for name, row in losses.LOSSES.items():
        if not row.margin:
            continue
        real = X @ [1.0, 2.0, 3.0] + rng.standard_normal(40)
        y = np.where(X[:, 0] > 0, 1.0, -1.0) if row.labels == "−1 or +1" else real
        data = Dataset(X, y, loss=name, l2=0.1)
        assert lr_grid_for(data)["stop"] == pytest.approx(8.0 / (lam * row.curvature + 0.1), rel=1e-12)
        for method, mrow in METHODS.items():
            grid = method_lr_grid(method, data)
            if mrow.lr_grid is None:
                assert grid == lr_grid_for(data)
            else:
                assert (grid["start"], grid["stop"], grid["per_decade"]) == mrow.lr_grid


def test_huber_is_quadratic_within_delta_and_linear_beyond():
    from echosim.training.losses import HUBER, HUBER_DELTA, curvature, deriv, value

    assert HUBER_DELTA == 1.0 and losses.LOSSES["huber"].curvature == 1.0
    for r in (-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.5):
        inside = abs(r) <= 1.0
        assert value(r, 0.0, HUBER) == (0.5 * r * r if inside else abs(r) - 0.5)
        assert deriv(r, 0.0, HUBER) == (r if inside else math.copysign(1.0, r))
        assert curvature(r, 0.0, HUBER) == (1.0 if inside else 0.0)


def test_a_huber_dataset_has_its_minimiser_and_constants_that_bound_every_row():
    from echosim.training.problems import Dataset
    from tests.naive import batch_loss, batch_loss_grad

    rng = np.random.default_rng(3)
    X = rng.standard_normal((80, 3))
    y = X @ [1.0, -2.0, 0.5] + 2.0 * rng.standard_t(2, 80)  # heavy tails: residuals on both sides of δ
    p = Dataset(X, y, loss="huber")
    r = X @ p.w_star - y
    assert (np.abs(r) < 1).any() and (np.abs(r) > 1).any()
    assert np.linalg.norm(batch_loss_grad(X, y, p.w_star, "huber", 0.0)) <= 1e-8
    assert p.F_star == pytest.approx(batch_loss(X, y, p.w_star, "huber", 0.0), rel=1e-12)
    c = p.constants()
    assert c["beta"] == pytest.approx((X**2).sum(axis=1).max(), rel=1e-12)
    for scale in (0.0, 0.5, 1.0):
        u = rng.standard_normal(3)
        w = p.w_star + scale * c["D"] * u / np.linalg.norm(u)
        grads = np.clip(X @ w - y, -1.0, 1.0)[:, None] * X
        assert np.linalg.norm(grads, axis=1).max() <= c["rho"] * (1 + 1e-12)
