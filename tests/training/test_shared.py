"""Runs of one fresh-batch stream advanced side by side (`run_shared`): each member is
bitwise the run it would be alone, for every method, loss and dtype, and each window
of fresh batches is drawn once."""

import numpy as np
import pytest

from echosim.pipeline.schedule import echo_schedule
from echosim.training import runner
from echosim.training.losses import LOSSES
from echosim.training.methods import METHODS, EchoedGD
from echosim.training.problems import Dataset, LeastSquares
from echosim.training.runner import run, run_many, run_shared

T, B, SEED = 40, 4, 5
FIELDS = ("batches", "steps", "risk", "risk_avg", "risk_end_avg", "w", "w_avg")


def _problem(loss):
    """A small problem of `loss`: the least-squares stream for "squared", else a data set
    with the labels the loss's row names."""
    if loss == "squared":
        return LeastSquares(dim=3, design="gaussian", decay=1.0, noise_std=0.3)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 3))
    labels = LOSSES[loss].labels
    if labels.startswith("class"):
        y = rng.integers(0, 3, 40)
    elif labels == "real targets":
        y = X @ [1.0, -1.0, 0.5] + 1.5 * rng.standard_normal(40)
    else:
        y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    return Dataset(X, y, loss=loss, l2=0.05)


def _members():
    """Every method of the table at a K of its own (one step per batch where the row takes
    one), an array K_t, a Schedule, two learning rates of one method, and a run that diverges."""
    K_t = np.arange(T) % 3 + 1
    out = []
    for i, (name, row) in enumerate(METHODS.items()):
        one = row.one_step
        echo = 1 if one else [2, K_t, echo_schedule(3, T)][i % 3]
        out.append((row.spec(0.05), echo))
    out.append(([EchoedGD(0.05), EchoedGD(0.2)], K_t))  # a run_many member
    out.append((EchoedGD(1e6), 2))  # diverges at once
    return out


def _alone(problem, member, dtype):
    opts, echo = member
    kw = {"batch_size": B, "echo": echo, "n_batches": T, "seed": SEED, "dtype": dtype, "log": "all", "quiet": True}
    return run_many(problem, opts, **kw) if isinstance(opts, list) else [run(problem, opts, **kw)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("loss", list(LOSSES))
def test_a_group_run_is_bitwise_each_run_alone_and_draws_each_window_once(loss, dtype, monkeypatch):
    monkeypatch.setattr(runner, "CHUNK_BYTES", 1)  # windows of 16 batches: three per run
    problem = _problem(loss)
    members = _members()
    drawn, real = [], problem.batches
    monkeypatch.setattr(problem, "batches", lambda seed, lo, hi, *a: (drawn.append((lo, hi)), real(seed, lo, hi, *a))[1])
    got = run_shared(problem, members, batch_size=B, n_batches=T, seed=SEED, dtype=dtype, log="all", quiet=True)
    assert sorted(drawn) == [(0, 16), (16, 32), (32, 40)]  # one draw of each window for all the members
    assert len(got) == len(members)
    statuses = []
    for member, trajs in zip(members, got):
        trajs = trajs if isinstance(member[0], list) else [trajs]
        for traj, want in zip(trajs, _alone(problem, member, dtype), strict=True):
            for f in FIELDS:
                assert np.array_equal(getattr(traj, f), getattr(want, f)), (member, f)
            assert (traj.status, traj.diverged_at) == (want.status, want.diverged_at)
            statuses.append(traj.status)
    assert statuses[-1] == "diverged" and got[-1].diverged_at < T  # the diverging member stopped early
    assert statuses.count("ok") >= len(METHODS)  # the others ran to the end


def test_members_of_other_lengths_and_own_log_points_share_the_windows_they_have_in_common(monkeypatch):
    monkeypatch.setattr(runner, "CHUNK_BYTES", 1)
    problem = _problem("squared")
    short, long_ = echo_schedule(2, 20), echo_schedule(np.arange(T) % 4 + 1, T)
    members = [(EchoedGD(0.1), short, [3, 20]), (METHODS["echoed_adam"].spec(0.05), long_)]
    got = run_shared(problem, members, batch_size=B, seed=SEED, log="all", log_unit="step", quiet=True)
    want = [run(problem, EchoedGD(0.1), batch_size=B, echo=short, seed=SEED, log=[3, 20], log_unit="step"),
            run(problem, METHODS["echoed_adam"].spec(0.05), batch_size=B, echo=long_, seed=SEED, log="all",
                log_unit="step")]
    for g, w in zip(got, want):
        for f in FIELDS:
            assert np.array_equal(getattr(g, f), getattr(w, f)), f
    assert list(got[0].steps) == [0, 3, 20, 40]  # and the last step, always


def test_run_shared_names_what_it_refuses():
    problem = _problem("squared")
    with pytest.raises(ValueError, match="at least one"):
        run_shared(problem, [], batch_size=B, n_batches=T)
    with pytest.raises(ValueError, match=r"members\[0\]: an \(optimizer, echo\)"):
        run_shared(problem, [EchoedGD(0.1)], batch_size=B, n_batches=T)
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.service_times import Exponential

    with pytest.raises(ValueError, match=r"members\[1\]: echo is a Pipeline"):
        run_shared(problem, [(EchoedGD(0.1), 2), (EchoedGD(0.1), Pipeline(arrival=Exponential(3.0)))],
                   batch_size=B, n_batches=T)
