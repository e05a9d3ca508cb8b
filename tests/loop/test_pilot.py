"""pilot(): the user's step under each policy in interleaved segments through `echoing`,
and the timing the planner takes from records (a torch-free stand-in for a DataLoader)."""

import numpy as np
import pytest

from echosim.planner import pilot, plan
from echosim.planner.recorded import recorded_timing


class Loader:
    """Re-iterable like a DataLoader: every pass yields `n` fresh batches (arrays of B rows)."""

    def __init__(self, n=5, B=8):
        self.n, self.B, self.passes = n, B, 0

    def __iter__(self):
        self.passes += 1
        for i in range(self.n):
            yield np.full((self.B, 2), float(i))


def test_segments_are_interleaved_and_every_step_is_recorded():
    seen = []

    def step(batch):
        seen.append(float(batch[0, 0]))
        return 1.0 / (1 + len(seen))

    loader = Loader(n=5)
    recs = pilot(step, loader, policies=("sync", 2, "greedy"), batches=6, rounds=2)
    # round 0: sync, 2, greedy; round 1 rotated: 2, greedy, sync
    assert [r.policy for r in recs] == ["sync", "fixed", "greedy", "fixed", "greedy", "sync"]
    assert all(r.n_batches == 3 for r in recs)  # 6 fresh batches per policy, in 2 segments
    assert all(r.batch_size == 8 for r in recs)
    assert sum(r.n_steps for r in recs) == len(seen)
    assert all(np.isfinite(r.loss).all() for r in recs)  # every returned loss was reported
    assert recs[1].steps_per_batch.tolist() == [2, 2, 2]
    assert loader.passes == 6  # each segment starts a fresh pass (shorter than an epoch here)


def test_a_segment_longer_than_an_epoch_passes_over_the_loader_again():
    recs = pilot(lambda b: None, Loader(n=2), policies=("sync",), batches=5, rounds=1)
    assert recs[0].n_batches == 5 and np.isnan(recs[0].loss).all()  # no loss returned: none reported


def test_recorded_timing_groups_by_policy_and_batch_size():
    recs = pilot(lambda b: 0.5, Loader(n=4, B=16), policies=("sync", 4), batches=8, rounds=2)
    timing = recorded_timing(recs, [16])
    groups = timing[16]
    assert [g[1] for g in groups] == ["sync", "fixed"]  # sorted by mean echo
    assert groups[0][0] == 1.0 and groups[1][0] == 4.0
    assert all(g[3].n > 0 for g in groups)  # step times measured


def test_plan_takes_a_pilot_s_records():
    recs = pilot(lambda b: 0.5, Loader(n=6, B=32), policies=("sync", "greedy"), batches=10)
    p = plan(records=recs, batch_size=32, steps_to_target={16: 400, 128: 120}, echoes=[2], seeds=1)
    assert p.recommended["batch_size"] == 32 and "in-run timing" in p.notes[0]


@pytest.mark.parametrize("kw, match", [
    ({"step": 3}, "^step: expected a callable"),
    ({"loader": iter([1, 2])}, "^loader: expected a re-iterable"),
    ({"policies": ("sync", "lazy")}, "^policy"),
    ({"policies": ()}, "^policies"),
    ({"batches": 1}, "^batches"),
    ({"rounds": 0}, "^rounds"),
    ({"rounds": 50, "batches": 10}, "^rounds: 50 segments .* need batches >= 100"),
    ({"policies": None}, "^policies"),
    ({"policies": {"sync": 1}}, "^policies"),
    ({"loader": []}, "^loader: it is empty; the pilot needs 40"),
    ({"policies": ("sync",), "max_echo": 0}, "^max_echo"),
    ({"policies": ("sync",), "batch_size": -64}, "^batch_size"),
    ({"policies": ("sync",), "auto": {"window": 0}}, "^auto|window"),
    ({"reset": 3}, "^reset: expected a callable reset\\(\\)"),
    ({"reset": "restore"}, "^reset: expected a callable"),
])
def test_bad_input_before_any_step(kw, match):
    calls = []
    args = {"step": lambda b: calls.append(b), "loader": Loader(), **kw}
    with pytest.raises(ValueError, match=match):
        pilot(args.pop("step"), args.pop("loader"), **args)
    assert calls == []


@pytest.mark.parametrize("batches, rounds, sizes", [(10, 2, [5, 5]), (5, 2, [3, 2]), (7, 3, [3, 2, 2]), (4, 2, [2, 2])])
def test_exactly_the_batches_and_rounds_asked(batches, rounds, sizes):
    recs = pilot(lambda b: 1.0, Loader(n=3), policies=("sync", 2), batches=batches, rounds=rounds)
    assert len(recs) == 2 * rounds
    assert [r.n_batches for r in recs] == [s for s in sizes for _ in range(2)]
    for p in ("sync", "fixed"):
        assert sum(r.n_batches for r in recs if r.policy == p) == batches


class Shrinking(Loader):
    """A re-iterable whose passes after the first are empty."""

    def __iter__(self):
        self.passes += 1
        if self.passes == 1:
            yield from super().__iter__()


def test_a_loader_too_short_for_a_segment_is_refused_with_the_number_needed():
    with pytest.raises(ValueError, match="^loader: it gave only 3 fresh batches .* needs 5 fresh batches"):
        pilot(lambda b: 1.0, Shrinking(n=3), policies=("sync",), batches=10, rounds=2)


def test_default_rounds_put_every_policy_at_every_position():
    recs = pilot(lambda b: 1.0, Loader(n=12), policies=("sync", 2, 4, "greedy"), batches=40)
    order = [(r.policy, r.echo) for r in recs]
    assert len(recs) == 16 and all(r.n_batches == 10 for r in recs)
    names = [("sync", 1), ("fixed", 2), ("fixed", 4), ("greedy", None)]
    for pos in range(4):  # a Latin square: each policy once at each position of a round
        assert sorted(order[4 * r + pos] for r in range(4)) == sorted(names)
    # fewer rounds where segments would get under 5 fresh batches
    assert len(pilot(lambda b: 1.0, Loader(n=12), policies=("sync", 2), batches=8)) == 2


def test_before_step_adds_the_signals_to_each_report():
    calls = []

    def before(it, batch):
        calls.append(it.is_echo)
        assert it._pause_depth == 1  # its time is taken out of the records
        return {} if it.is_echo else {"lagged_loss": 2.0 + float(batch[0, 0])}

    recs = pilot(lambda b: 1.0, Loader(n=6), policies=("sync", 2), batches=6, rounds=2, before_step=before)
    assert len(calls) == sum(r.n_steps for r in recs)  # called before every step
    for r in recs:  # the paired progress of batch t: batch t+1's lagged loss minus its loss (1.0)
        p = r.paired_progress[:-1]
        assert np.allclose(p, 1.0 + np.arange(1, r.n_batches)), p


@pytest.mark.parametrize("kw, match", [
    ({"before_step": 3}, "^before_step: expected a callable"),
    ({"before_step": lambda it, b: [1]}, "^before_step: expected a dict"),
    ({"before_step": lambda it, b: {"lagged_loss": 1.0}, "step": lambda b: None}, "^step: returned None"),
])
def test_bad_hooks(kw, match):
    args = {"step": lambda b: 1.0, **kw}
    with pytest.raises(ValueError, match=match):
        pilot(args.pop("step"), Loader(), policies=("sync",), batches=4, **args)


def test_reset_is_called_once_before_each_segment_s_first_step():
    events = []
    recs = pilot(lambda b: events.append("step") or 1.0, Loader(n=6), policies=("sync", 2, "greedy"), batches=6,
                 rounds=2, reset=lambda: events.append("reset"))
    assert events.count("reset") == len(recs) == 6
    # split at each reset: every piece is one segment's steps, in the order run, none before the first reset
    assert events[0] == "reset"
    pieces = "|".join(events).split("reset")[1:]
    assert [p.strip("|").count("step") for p in pieces] == [r.n_steps for r in recs]
    assert all(r.n_steps > 0 for r in recs)


class Quadratic:
    """A NumPy stand-in for a model and its optimizer: heavy-ball steps on the mean squared
    distance of weights `w` to a batch's rows; `state()`/`load()` copy like state_dict."""

    def __init__(self):
        self.w, self.v = np.array([5.0, -3.0]), np.zeros(2)

    def step(self, batch):
        loss = float(np.mean((batch - self.w) ** 2))
        self.v = 0.5 * self.v + 0.1 * 2 * np.mean(self.w - batch, axis=0)
        self.w = self.w - self.v
        return loss

    def state(self):
        return self.w.copy(), self.v.copy()

    def load(self, s):
        self.w, self.v = s[0].copy(), s[1].copy()


@pytest.mark.parametrize("reset", [True, False])
def test_reset_restores_the_weights_so_every_segment_trains_the_same_stretch(reset):
    m = Quadratic()
    w0 = m.state()
    recs = pilot(m.step, Loader(n=6), policies=("sync", 2), batches=6, rounds=3,
                 reset=(lambda: m.load(w0)) if reset else None)
    start = float(np.mean((np.zeros(2) - w0[0]) ** 2))  # batch 0 is all zeros, at the saved weights
    firsts = [float(r.loss[0]) for r in recs]
    sync = [r.loss.tolist() for r in recs if r.policy == "sync"]
    if reset:  # every segment from the saved weights: the same first loss; sync's segments identical
        assert np.allclose(firsts, start, rtol=0, atol=1e-12)
        assert all(np.array_equal(s, sync[0]) for s in sync)
    else:  # one model trained on: later segments start lower
        assert firsts[0] == pytest.approx(start) and max(firsts[1:]) < 0.5 * start
        assert not np.array_equal(sync[0], sync[1])
    assert np.array_equal(w0[0], [5.0, -3.0])  # the saved state itself is untouched
