"""run(): the public face of one simulation — twins, invariants, reproducibility, bad input."""

import dataclasses

import numpy as np
import pytest

import echosim
from echosim.training import runner as experiment
from echosim.training.runner import _sub_batch_rows, log_points, run
from echosim.training.methods import (METHODS, EchoedAdam, EchoedAdamW, EchoedGD, EchoedHeavyBall, EchoedNesterov,
                                      EchoedProx, EchoedSGD, MinibatchSGD)
from echosim.training.losses import LOSSES
from echosim.training.problems import Dataset, LeastSquares, Logistic
from tests.naive import echoed_run


def with_every_row(specs, lr=0.05):
    """`specs`, and every method of the table they leave out at its defaults and `lr`."""
    named = {o.name for o in specs}
    return [*specs, *(row.spec(lr) for name, row in METHODS.items() if name not in named)]


LS = LeastSquares(dim=6, design="gaussian", decay=1.0, noise_std=0.3)
_rng = np.random.default_rng(0)
LOGI = Dataset(_rng.standard_normal((50, 3)), np.where(_rng.random(50) < 0.5, -1.0, 1.0),
               loss="logistic", l2=0.1)
SOFTMAX = Dataset(_rng.standard_normal((60, 3)), _rng.integers(0, 4, 60), loss="softmax", l2=0.05)


def _table_of(loss):
    """A small data set for `loss` with the labels its row names (residuals of real targets
    spread past 1, as the Huber loss's δ)."""
    assert LOSSES[loss].labels == "real targets", loss
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 3))
    y = X @ [1.0, -1.0, 0.5] + 1.5 * rng.standard_normal(50)
    return Dataset(X, y, loss=loss, l2=0.05)


TWIN_PROBLEMS = [LS, *({"logistic": LOGI, "softmax": SOFTMAX}.get(name) or _table_of(name) for name in LOSSES)]
"""The least-squares stream and a data set of every loss of the table."""


@pytest.mark.parametrize("optimizer", with_every_row([
    EchoedGD(0.2),
    EchoedNesterov(0.05),
    EchoedNesterov(0.1, momentum=0.5),
    EchoedProx(0.2, lam=0.5),
    EchoedSGD(0.2, sub_batch=3),
    EchoedSGD(0.2, sub_batch=5, replace=False),
    EchoedHeavyBall(0.05, momentum=0.8),
    EchoedAdam(0.05, betas=(0.8, 0.99), eps=1e-6),
]), ids=repr)
@pytest.mark.parametrize("problem", TWIN_PROBLEMS, ids=["least-squares", *(f"dataset-{name}" for name in LOSSES)])
def test_run_matches_naive_twin_on_the_same_batches(problem, optimizer, monkeypatch):
    monkeypatch.setattr(experiment, "CHUNK_BYTES", 1)  # several kernel calls: state must carry over
    T, B, seed = 40, 8, 11
    K = np.random.default_rng(seed).integers(1, 4, size=T)
    K = np.ones_like(K) if optimizer.method.one_step else K
    traj = run(problem, optimizer, batch_size=B, echo=K, seed=seed, log="all", first_loss=True)
    X, Y = problem.batches(seed, 0, T, B)
    rows = _sub_batch_rows(optimizer, seed, K, 0, T, B) if isinstance(optimizer, EchoedSGD) else None
    last, avg, end, first = echoed_run(X, Y, K, np.full(T, optimizer.lr), optimizer, loss=problem.loss,
                                       l2=problem.l2, rows=rows, w0=np.zeros(problem.dim), first_loss=True)
    np.testing.assert_allclose(traj.first_loss, first, rtol=1e-12)
    assert traj.status == "ok"
    np.testing.assert_array_equal(traj.batches, np.arange(T + 1))
    np.testing.assert_array_equal(traj.steps, np.concatenate([[0], np.cumsum(K)]))
    np.testing.assert_allclose(traj.risk[1:], problem.excess_risk(last), rtol=1e-12)
    np.testing.assert_allclose(traj.risk_avg[1:], problem.excess_risk(avg), rtol=1e-12)
    np.testing.assert_allclose(traj.risk_end_avg[1:], problem.excess_risk(end), rtol=1e-12)
    np.testing.assert_allclose(traj.w, last[-1], rtol=1e-12, atol=1e-15)


def test_echo_one_of_echoed_gd_is_minibatch_sgd():
    a = run(LS, EchoedGD(0.1), batch_size=16, echo=1, n_batches=100, seed=3)
    b = run(LS, MinibatchSGD(0.1), batch_size=16, echo=1, n_batches=100, seed=3)
    np.testing.assert_array_equal(a.risk, b.risk)


def test_sub_batch_equal_to_batch_without_replacement_is_echoed_gd():
    a = run(LS, EchoedGD(0.1), batch_size=8, echo=3, n_batches=50, seed=4)
    b = run(LS, EchoedSGD(0.1, sub_batch=8, replace=False), batch_size=8, echo=3, n_batches=50, seed=4)
    np.testing.assert_allclose(a.risk, b.risk, rtol=1e-12)


def test_zero_learning_rate_leaves_the_risk_at_its_start():
    w0 = np.ones(LS.dim)
    traj = run(LS, EchoedGD(0.0), batch_size=8, echo=3, n_batches=20, w0=w0)
    np.testing.assert_array_equal(traj.risk, np.full(21, LS.excess_risk(w0)[0]))


def test_same_seed_same_batches_whatever_echo_or_optimizer():
    # Common random numbers: the data stream depends on (seed, t, B) only.
    X1, _ = LS.batches(5, 0, 48, 4)
    X2, _ = LS.batches(5, 16, 32, 4)
    np.testing.assert_array_equal(X1[16:32], X2)
    a = run(LS, EchoedGD(0.0), batch_size=4, echo=1, n_batches=10, seed=5)
    b = run(LS, EchoedNesterov(0.0), batch_size=4, echo=7, n_batches=10, seed=5)
    np.testing.assert_array_equal(a.risk, b.risk)


def test_results_do_not_depend_on_the_chunk_size(monkeypatch):
    full = run(LS, EchoedSGD(0.1, sub_batch=2), batch_size=8, echo=3, n_batches=70, seed=2)
    monkeypatch.setattr(experiment, "CHUNK_BYTES", 1)
    chunked = run(LS, EchoedSGD(0.1, sub_batch=2), batch_size=8, echo=3, n_batches=70, seed=2)
    np.testing.assert_array_equal(full.risk, chunked.risk)



def test_identical_averages_are_evaluated_once(monkeypatch):
    """K = 1: every step ends a batch, so both averages, and their risks, are the same."""
    problem = Logistic(dim=4)
    calls = []
    risk = problem.excess_risk
    monkeypatch.setattr(problem, "excess_risk", lambda W: (calls.append(len(W)), risk(W))[1])
    for K, n_calls in ((1, 2), (2, 3)):
        calls.clear()
        traj = run(problem, EchoedGD(0.5), batch_size=4, echo=K, n_batches=30)
        assert len(calls) == n_calls
    one = run(problem, EchoedGD(0.5), batch_size=4, echo=1, n_batches=30)
    np.testing.assert_array_equal(one.risk_avg, one.risk_end_avg)
    assert one.risk_avg is not one.risk_end_avg
    assert not np.array_equal(traj.risk_avg, traj.risk_end_avg)


def test_learning_rate_schedule_as_callable_and_array():
    T = 30
    sched = run(LS, EchoedGD(lambda t: 0.2 / np.sqrt(t + 1)), batch_size=8, echo=2, n_batches=T, seed=1)
    arr = run(LS, EchoedGD(0.2 / np.sqrt(np.arange(T) + 1)), batch_size=8, echo=2, n_batches=T, seed=1)
    np.testing.assert_array_equal(sched.risk, arr.risk)


def test_divergence_is_a_result_not_a_nan():
    traj = run(LS, EchoedGD(50.0), batch_size=8, echo=4, n_batches=200, seed=0)
    assert traj.status == "diverged"
    assert traj.diverged_at is not None and 1 <= traj.diverged_at <= 200
    for arr in (traj.risk, traj.risk_avg, traj.risk_end_avg):
        assert np.all(np.isfinite(arr))
    assert traj.batches[-1] < traj.diverged_at
    assert traj.summary()["status"] == "diverged"


def test_float32_run_tracks_float64():
    problem = Logistic(dim=5, design="sphere")
    a = run(problem, EchoedGD(1.0), batch_size=32, echo=2, n_batches=50, seed=0)
    b = run(problem, EchoedGD(1.0), batch_size=32, echo=2, n_batches=50, seed=0, dtype="float32")
    np.testing.assert_allclose(b.risk, a.risk, rtol=1e-4, atol=1e-6)


def test_log_points_auto_all_count_and_explicit():
    np.testing.assert_array_equal(log_points("auto", 5), [1, 2, 3, 4, 5])
    pts = log_points("auto", 10**6)  # every ⌈n/2000⌉: the rule sweeps use too
    assert pts[-1] == 10**6 and len(pts) == experiment.AUTO_LOG_MAX
    np.testing.assert_array_equal(np.diff(pts), 500)
    np.testing.assert_array_equal(log_points("auto", 2001), np.union1d(np.arange(2, 2002, 2), [2001]))
    from echosim.experiments.assemble import _log_at

    for n in (7, 2000, 2001, 123_457):
        np.testing.assert_array_equal(np.union1d(_log_at({}, n), [n]), log_points("auto", n))
        np.testing.assert_array_equal(np.union1d(_log_at({"log_every": "auto"}, n), [n]), log_points("auto", n))
    np.testing.assert_array_equal(log_points([3, 1], 5), [1, 3, 5])
    traj = run(LS, EchoedGD(0.1), batch_size=4, echo=1, n_batches=10**4, seed=0, log=20)
    assert traj.batches[-1] == 10**4 and len(traj) <= 21


def test_public_names_are_reexported():
    assert echosim.run is run
    assert echosim.EchoedGD is EchoedGD


@pytest.mark.parametrize("kwargs, field", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=2.5), "batch_size"),
    (dict(echo=0), "echo"),
    (dict(echo=np.array([1, 0, 2]), n_batches=None), "K_t"),
    (dict(echo=np.array([1, 2])), "n_batches"),
    (dict(echo=1.5), "echo"),
    (dict(n_batches=0), "n_batches"),
    (dict(n_batches=None), "n_batches"),
    (dict(seed=-1), "seed"),
    (dict(dtype="float16"), "dtype"),
    (dict(w0=np.ones(3)), "w0"),
    (dict(log="sometimes"), "log"),
])
def test_bad_input_names_the_argument(kwargs, field):
    args = dict(batch_size=4, echo=2, n_batches=5, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        run(LS, EchoedGD(0.1), **args)


@pytest.mark.parametrize("make, field", [
    (lambda: EchoedGD(-0.1), "lr"),
    (lambda: EchoedGD(float("nan")), "lr"),
    (lambda: EchoedGD("fast"), "lr"),
    (lambda: EchoedSGD(0.1, sub_batch=0), "sub_batch"),
    (lambda: EchoedNesterov(0.1, momentum=1.5), "momentum"),
    (lambda: EchoedProx(0.1, lam=-1), "lam"),
    (lambda: EchoedHeavyBall(0.1, momentum=1.0), "momentum"),
    (lambda: EchoedHeavyBall(0.1, momentum="nesterov"), "momentum"),
    (lambda: EchoedAdam(0.1, betas=(0.9,)), "betas"),
    (lambda: EchoedAdam(0.1, betas=(0.9, 1.0)), r"betas\[1\]"),
    (lambda: EchoedAdam(0.1, eps=0.0), "eps"),
])
def test_bad_optimizer_specs_name_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_bad_pairings_are_refused_before_work():
    with pytest.raises(ValueError, match="one step per batch"):
        run(LS, MinibatchSGD(0.1), batch_size=4, echo=2, n_batches=5)
    with pytest.raises(ValueError, match="sub_batch"):
        run(LS, EchoedSGD(0.1, sub_batch=9, replace=False), batch_size=4, echo=2, n_batches=5)
    with pytest.raises(ValueError, match="lr"):
        run(LS, EchoedGD(np.ones(3)), batch_size=4, echo=2, n_batches=5)
    with pytest.raises(ValueError, match="problem"):
        run("ls", EchoedGD(0.1), batch_size=4, echo=2, n_batches=5)


def test_end_to_end_echoed_gd_on_a_greedy_pipeline_schedule():
    from echosim.pipeline.service_times import Exponential
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate

    schedule = simulate(Pipeline(arrival=Exponential(4.0), workers=2, prefetch=2, policy="greedy", max_echo=8),
                        n_batches=60, seed=3)
    traj = run(LS, EchoedGD(0.1), batch_size=8, echo=schedule, seed=1, log="all")
    same_k = run(LS, EchoedGD(0.1), batch_size=8, echo=schedule.steps_per_batch, seed=1, log="all")
    np.testing.assert_array_equal(traj.risk, same_k.risk)
    ends = np.cumsum(schedule.steps_per_batch)
    np.testing.assert_array_equal(traj.steps[1:], ends)
    np.testing.assert_array_equal(traj.time[1:], schedule.step_end[ends - 1])
    assert traj.time[0] == 0 and np.all(np.diff(traj.time) > 0)


def test_example_echoing_schedule_matches_the_naive_twin_on_gathered_batches():
    from echosim.pipeline.service_times import Exponential
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate

    B, T = 4, 30
    schedule = simulate(Pipeline(arrival=Exponential(3.0), policy="example", echo=2.5, shuffle_buffer=12),
                        n_batches=T, seed=0, batch_size=B)
    traj = run(LS, EchoedGD(0.2), batch_size=B, echo=schedule, seed=2, log="all")
    X, Y = LS.batches(2, 0, T, B)
    batch, row = np.divmod(schedule.step_examples, B)
    last, avg, _ = echoed_run(X[batch, row], Y[batch, row], np.ones(schedule.n_steps, dtype=int),
                              np.full(schedule.n_steps, 0.2), EchoedGD(0.2))
    np.testing.assert_allclose(traj.risk[1:], LS.excess_risk(last), rtol=1e-12)
    np.testing.assert_allclose(traj.risk_avg[1:], LS.excess_risk(avg), rtol=1e-12)
    np.testing.assert_array_equal(traj.batches[1:], schedule.step_batch + 1)
    np.testing.assert_array_equal(traj.time[1:], schedule.step_end)
    with pytest.raises(ValueError, match="batch_size"):
        run(LS, EchoedGD(0.2), batch_size=B + 1, echo=schedule)


@pytest.mark.parametrize("optimizer", [EchoedGD(0.2), EchoedNesterov(0.05)], ids=repr)
def test_step_logging_gives_every_step_of_the_naive_twin(optimizer, monkeypatch):
    monkeypatch.setattr(experiment, "CHUNK_BYTES", 1)  # step logs that straddle kernel calls
    T, B, seed = 30, 8, 5
    K = np.random.default_rng(seed).integers(1, 5, size=T)
    traj = run(LS, optimizer, batch_size=B, echo=K, seed=seed, log="all", log_unit="step")
    N = int(K.sum())
    X, Y = LS.batches(seed, 0, T, B)
    # these methods do not see batch boundaries: every step as its own batch is the same run
    last, avg, _ = echoed_run(np.repeat(X, K, axis=0), np.repeat(Y, K, axis=0), np.ones(N, dtype=int),
                              np.full(N, optimizer.lr), optimizer, loss="squared")
    np.testing.assert_array_equal(traj.steps, np.arange(N + 1))
    began = np.concatenate([[0], np.repeat(np.arange(1, T + 1), K)])  # fresh batches begun by each step
    np.testing.assert_array_equal(traj.batches, began)
    np.testing.assert_allclose(traj.risk[1:], LS.excess_risk(last), rtol=1e-12)
    np.testing.assert_allclose(traj.risk_avg[1:], LS.excess_risk(avg), rtol=1e-12)


@pytest.mark.parametrize("optimizer", [EchoedGD(0.2), EchoedProx(0.2, lam=0.5), EchoedSGD(0.2, sub_batch=3),
                                       EchoedNesterov(0.05)], ids=lambda o: type(o).__name__)
def test_step_logs_at_batch_ends_are_the_batch_logs(optimizer):
    pipe = echosim.Pipeline(echosim.Gamma(mean=3.0, cv=0.5), policy="greedy", max_echo=6)
    schedule = echosim.simulate(pipe, n_batches=40, seed=2)
    by_batch = run(LS, optimizer, batch_size=8, echo=schedule, seed=3, log="all")
    by_step = run(LS, optimizer, batch_size=8, echo=schedule, seed=3, log="all", log_unit="step")
    ends = np.searchsorted(by_step.steps, by_batch.steps)
    for name in ("batches", "steps", "time", "risk", "risk_avg", "risk_end_avg"):
        np.testing.assert_array_equal(getattr(by_step, name)[ends], getattr(by_batch, name), err_msg=name)
    assert len(by_step) == schedule.n_steps + 1 and by_step.info["log_unit"] == "step"


TRAJECTORY_FIELDS = ("batches", "steps", "time", "risk", "risk_avg", "risk_end_avg", "w", "w_avg")


def assert_same_trajectory(got, want):
    assert (got.status, got.diverged_at, got.info) == (want.status, want.diverged_at, want.info)
    for name in TRAJECTORY_FIELDS + ("first_loss",):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        assert a is None or a.tobytes() == b.tobytes(), name


@pytest.mark.parametrize("pipe", [
    echosim.Pipeline(echosim.Gamma(mean=4.0, cv=0.5), prefetch=3, step_time=echosim.Gamma(mean=1.0, cv=0.3),
                     policy="greedy", switch_overhead=0.2),
    echosim.Pipeline(echosim.Exponential(3.0), workers=2, step_time=echosim.LogNormal(mean=1.0, cv=0.5),
                     policy="fixed", echo=2.5),
], ids=["greedy", "fixed"])
@pytest.mark.parametrize("log_unit", ["batch", "step"])
def test_a_long_pipeline_schedule_runs_bitwise_as_a_held_one(pipe, log_unit, monkeypatch):
    """A schedule too long to keep its steps (derived in chunks of 41 steps, boundaries
    mid-run and mid-batch) gives the same runs as the same schedule holding them."""
    from echosim.pipeline import stream

    held = echosim.simulate(pipe, n_batches=250, seed=6)
    monkeypatch.setattr(stream, "STEP_CHUNK", 41)
    derived = echosim.simulate(pipe, n_batches=250, seed=6)
    assert derived.n_steps > 10 * 41 and isinstance(derived._steps, stream.DerivedSteps)
    kw = dict(batch_size=4, seed=2, log=80, log_unit=log_unit)
    assert_same_trajectory(run(LS, EchoedGD(0.1), echo=derived, **kw), run(LS, EchoedGD(0.1), echo=held, **kw))
    lrs = [0.05, 0.3, 1e4]  # the last one diverges
    many = echosim.run_many(LS, [EchoedGD(lr) for lr in lrs], echo=derived, **kw)
    for got, want in zip(many, echosim.run_many(LS, [EchoedGD(lr) for lr in lrs], echo=held, **kw)):
        assert_same_trajectory(got, want)
    assert [t.status for t in many] == ["ok", "ok", "diverged"]
    assert many[0].time[-1] == held.makespan
    assert derived._steps._arrays is None  # the runs built no per-step array


def test_a_number_or_array_of_k_goes_through_the_pipeline_layers_schedule():
    a = run(LS, EchoedGD(0.1), batch_size=8, echo=3, n_batches=20, seed=1)
    b = run(LS, EchoedGD(0.1), batch_size=8, echo=echosim.pipeline.echo_schedule(3, 20), seed=1)
    np.testing.assert_array_equal(a.risk, b.risk)
    assert a.time is None and b.time is None
    with pytest.raises(ValueError, match="log_unit"):
        run(LS, EchoedGD(0.1), batch_size=8, echo=3, n_batches=20, log_unit="epoch")


@pytest.mark.parametrize("make, problem", [
    (EchoedGD, LeastSquares(dim=5, decay=1.0)),
    (EchoedGD, Logistic(dim=4, radius=2.0)),
    (lambda lr: EchoedNesterov(lr, momentum=0.5), LeastSquares(dim=3)),
    (lambda lr: EchoedProx(lr, lam=0.5), LOGI),
    (lambda lr: EchoedSGD(lr, sub_batch=3), Logistic(dim=3)),
    (EchoedGD, SOFTMAX),
], ids=["gd-ls", "gd-logistic", "nesterov", "prox-dataset", "sgd", "softmax-loop"])
def test_run_many_equals_one_run_per_learning_rate(make, problem, monkeypatch):
    monkeypatch.setattr(experiment, "CHUNK_BYTES", 1)  # several kernel calls: state must carry over
    # ηβ < 2 (stable: rounding differences do not grow), and on least squares one η that diverges
    lrs = [0.0, 0.05, 0.3, 1.5] + ([40.0] if problem.loss == "squared" else [])
    K = np.random.default_rng(1).integers(1, 4, size=45)
    kw = dict(batch_size=8, echo=K, seed=3, log="all")
    many = echosim.run_many(problem, [make(lr) for lr in lrs], **kw)
    for lr, got in zip(lrs, many):
        want = run(problem, make(lr), **kw)
        assert (got.status, got.diverged_at, got.info) == (want.status, want.diverged_at, want.info)
        for name in ("batches", "steps"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        for name in ("risk", "risk_avg", "risk_end_avg", "w", "w_avg"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-15)


def test_run_many_refuses_optimizers_that_differ_beyond_the_learning_rate():
    with pytest.raises(ValueError, match="differing only in lr"):
        echosim.run_many(LS, [EchoedGD(0.1), EchoedNesterov(0.1)], batch_size=4, n_batches=2)
    with pytest.raises(ValueError, match="differing only in lr"):
        echosim.run_many(LS, [EchoedProx(0.1, lam=1.0), EchoedProx(0.1, lam=2.0)], batch_size=4, n_batches=2)


def test_compiled_kernels_have_the_types_real_runs_pass():
    """`compile_kernels` calls each kernel on tiny arrays; a real run afterwards must reuse
    that compiled code (no new signature), or a sweep's workers would compile again."""
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate
    from echosim.pipeline.service_times import Exponential
    from echosim.training import kernel, sampling

    from echosim.training.runner import kernel_key

    opts = (EchoedGD(0.1), EchoedSGD(0.1, sub_batch=2), EchoedAdam(0.1), EchoedAdamW(0.1), MinibatchSGD(0.1))
    problems = (LeastSquares(dim=3), Logistic(dim=3), LOGI, SOFTMAX)
    keys = sorted({kernel_key(o.name, p.loss, many) for o in opts for p in problems for many in (False, True)})
    dispatchers = [experiment._kernel(k) for k in keys] + [sampling.draw_block]
    experiment.compile_kernels(("float64", "float32"), kernels=[*keys, "draws"])
    compiled = [set(f.signatures) for f in dispatchers]
    example = simulate(Pipeline(arrival=Exponential(3.0), policy="example", echo=2.5), n_batches=6, seed=0,
                       batch_size=4)
    for dtype in ("float64", "float32"):
        for problem in problems:
            for opt in opts:
                echo = 1 if isinstance(opt, MinibatchSGD) else 3
                for log_unit in ("batch", "step"):
                    kw = dict(batch_size=4, echo=echo, n_batches=5, dtype=dtype, log_unit=log_unit)
                    run(problem, opt, **kw)
                    echosim.run_many(problem, [opt, opt], first_loss=True, **kw)
                    state = experiment.start(problem, opt, batch_size=4, dtype=dtype, log_unit=log_unit)
                    state.advance([echo, echo], step_end=np.arange(1.0, 2 * echo + 1))
                    state.trajectory()
        run(LS, EchoedGD(0.1), batch_size=4, echo=example, dtype=dtype)
        echosim.run_many(LS, [EchoedGD(0.1)], batch_size=4, echo=example, dtype=dtype)
    assert [set(f.signatures) for f in dispatchers] == compiled
    del kernel


def test_compile_kernels_names_what_it_can_compile():
    with pytest.raises(ValueError, match="kernels must be"):
        experiment.compile_kernels(kernels=["echoed_gd:logistic:wide", "everything"])
    with pytest.raises(ValueError, match="method must be one of"):
        experiment.compile_kernels(kernels=["echoed_lion:logistic:wide"])
    with pytest.raises(ValueError, match="loss must be one of"):
        experiment.compile_kernels(kernels=["echoed_gd:hinge:rows"])


# --------------------------------------------------------------------------- block by block (issue 19's driver)

ALL_METHODS = with_every_row([EchoedGD(0.2), MinibatchSGD(0.2), EchoedSGD(0.2, sub_batch=3),
                             EchoedSGD(0.2, sub_batch=5, replace=False), EchoedNesterov(0.05),
                             EchoedNesterov(0.1, momentum=0.5), EchoedProx(0.2, lam=0.5),
                             EchoedHeavyBall(0.05, momentum=0.8), EchoedAdam(0.05)])


def _blocks(T, rng):
    """Block sizes that straddle the data windows (16 batches) at odd places."""
    cuts = np.unique(np.concatenate([[0, 1, 2, 16, 17, T], rng.integers(1, T, size=6)]))
    return list(zip(cuts[:-1], cuts[1:]))


@pytest.mark.parametrize("optimizer", ALL_METHODS, ids=repr)
@pytest.mark.parametrize("log_unit", ["batch", "step"])
def test_a_run_advanced_block_by_block_is_bitwise_the_run_at_once(optimizer, log_unit):
    T, B, seed = 45, 8, 4
    rng = np.random.default_rng(7)
    K = np.ones(T, dtype=np.int64) if isinstance(optimizer, MinibatchSGD) else rng.integers(1, 4, size=T)
    whole = run(LOGI, optimizer, batch_size=B, echo=K, seed=seed, log="all", log_unit=log_unit, first_loss=True)
    for n_batches in (T, None):  # a known horizon, and an open one
        state = echosim.start(LOGI, optimizer, batch_size=B, seed=seed, n_batches=n_batches, log="all",
                              log_unit=log_unit, first_loss=True)
        firsts = [state.advance(K[a:b]) for a, b in _blocks(T, rng)]
        assert_same_trajectory(state.trajectory(), whole)
        assert np.concatenate(firsts).tobytes() == whole.first_loss.tobytes()
        assert state.first_losses.tobytes() == whole.first_loss.tobytes() and state.batches_done == T


@pytest.mark.parametrize("optimizer", [EchoedGD(0.3), EchoedAdam(0.05), EchoedSGD(0.3, sub_batch=2)], ids=repr)
def test_many_learning_rates_advanced_block_by_block_are_bitwise_the_run_at_once(optimizer):
    T, rng = 40, np.random.default_rng(3)
    K = rng.integers(1, 4, size=T)
    opts = [dataclasses.replace(optimizer, lr=lr) for lr in (0.05, 0.3, 40.0)]  # the last one diverges
    whole = echosim.run_many(LS, opts, batch_size=8, echo=K, seed=2, log=[3, 10, 25], first_loss=True)
    state = echosim.start_many(LS, opts, batch_size=8, seed=2, n_batches=T, log=[3, 10, 25], first_loss=True)
    for a, b in _blocks(T, rng):
        state.advance(K[a:b])
    for got, want in zip(state.trajectories(), whole):
        assert_same_trajectory(got, want)
    assert [t.status for t in whole] == ["ok", "ok", "diverged"] or isinstance(optimizer, EchoedAdam)
    assert state.first_losses.shape == (T, 3)


def test_block_step_times_give_the_wall_clock_of_a_timed_schedule():
    pipe = echosim.Pipeline(echosim.Gamma(mean=3.0, cv=0.5), policy="greedy", max_echo=6)
    schedule = echosim.simulate(pipe, n_batches=50, seed=2)
    for log_unit in ("batch", "step"):
        whole = run(LS, EchoedHeavyBall(0.05), batch_size=8, echo=schedule, seed=3, log="all", log_unit=log_unit)
        state = echosim.start(LS, EchoedHeavyBall(0.05), batch_size=8, seed=3, n_batches=50, log_unit=log_unit)
        K, ends = schedule.steps_per_batch, schedule.step_end
        steps = np.concatenate([[0], np.cumsum(K)])
        for a, b in _blocks(50, np.random.default_rng(0)):
            state.advance(K[a:b], step_end=ends[steps[a]:steps[b]])
        assert_same_trajectory(state.trajectory(), whole)


def test_a_block_run_stopped_between_log_points_ends_with_its_current_state():
    state = echosim.start(LS, EchoedGD(0.1), batch_size=8, seed=1, log=[5, 20])
    state.advance(np.full(12, 2))
    traj = state.trajectory()
    np.testing.assert_array_equal(traj.batches, [0, 5, 12])
    whole = run(LS, EchoedGD(0.1), batch_size=8, echo=2, n_batches=12, seed=1, log="all")
    assert traj.risk[-1] == whole.risk[-1] and traj.risk_avg[-1] == whole.risk_avg[-1]
    assert traj.w.tobytes() == whole.w.tobytes()


def test_block_run_bad_input_names_the_argument():
    state = echosim.start(LS, EchoedGD(0.1), batch_size=4, n_batches=5)
    with pytest.raises(ValueError, match="K_t"):
        state.advance([2, 0])
    with pytest.raises(ValueError, match="n_batches=5"):
        state.advance(np.ones(6, dtype=int))
    with pytest.raises(ValueError, match="step_end"):
        state.advance([1, 1], step_end=[2.0, 1.0])
    with pytest.raises(ValueError, match="one step per batch"):
        echosim.start(LS, MinibatchSGD(0.1), batch_size=4).advance([2])
    with pytest.raises(ValueError, match="log="):
        echosim.start(LS, EchoedGD(0.1), batch_size=4, log="auto")  # no horizon to space "auto" over
    with pytest.raises(ValueError, match="n_batches"):
        echosim.start(LS, EchoedGD(np.ones(3)), batch_size=4)
    with pytest.raises(ValueError, match="first_loss"):
        example = echosim.simulate(echosim.Pipeline(echosim.Exponential(3.0), policy="example", echo=2.0),
                                   n_batches=4, seed=0, batch_size=4)
        run(LS, EchoedGD(0.1), batch_size=4, echo=example, first_loss=True)


def test_an_unknown_loss_is_an_error_at_the_facade_never_a_silent_logistic():
    class Hinge(LeastSquares):
        loss = "hinge"

    with pytest.raises(ValueError, match=f"loss must be one of {', '.join(map(repr, LOSSES))}; got 'hinge'"):
        run(Hinge(dim=3), EchoedGD(0.1), batch_size=4, echo=1, n_batches=3)
    with pytest.raises(ValueError, match="loss must be one of"):
        Dataset(np.ones((4, 2)), np.ones(4), loss="hinge")


def test_trajectory_to_frame_has_one_row_per_logged_point():
    pd = pytest.importorskip("pandas")
    traj = run(LS, EchoedAdam(0.05), batch_size=8, echo=2, n_batches=20, seed=0, log=5)
    frame = traj.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(traj)
    np.testing.assert_array_equal(frame["risk"], traj.risk)
    assert frame["time"].isna().all()
    assert set(frame.columns) == set(frame.attrs["units"])  # every column says its unit


def test_trajectory_to_frame_without_pandas_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("no pandas here")
        return real_import(name, *args, **kwargs)

    traj = run(LS, EchoedGD(0.1), batch_size=8, echo=1, n_batches=5)
    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"echosim\[sweep\]"):
        traj.to_frame()


def test_a_run_says_once_on_stderr_when_it_compiles_and_never_when_it_does_not(capfd, monkeypatch):
    from numba.core import event

    def compiling_run(**kwargs):
        with event.trigger_event("numba:compile", data={}):  # what Numba reports when it compiles
            with event.trigger_event("numba:compile", data={}):
                pass
        return kwargs

    monkeypatch.delenv(experiment.QUIET_ENV, raising=False)
    with experiment._compile_notice(quiet=False):
        compiling_run()
    assert capfd.readouterr().err.count("compiling the Numba kernels") == 1
    with experiment._compile_notice(quiet=True):
        compiling_run()
    monkeypatch.setenv(experiment.QUIET_ENV, "1")
    with experiment._compile_notice(quiet=False):
        compiling_run()
    assert capfd.readouterr().err == ""
    monkeypatch.delenv(experiment.QUIET_ENV)
    run(LS, EchoedGD(0.1), batch_size=8, echo=1, n_batches=5)  # compiled already in this process
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_spec_whose_kernel_hyper_parameters_miss_its_row_is_refused_before_the_kernel_reads_them():
    class Short(EchoedAdamW):
        def kernel_hyper(self):
            return super().kernel_hyper()[:3]

    with pytest.raises(ValueError, match="kernel_hyper\\(\\) gives 3 values; its row reads 4 \\(beta1, beta2, eps, "
                                         "weight_decay\\)"):
        run(LS, Short(0.01), batch_size=4, echo=2, n_batches=3)
