"""Records in bounded memory: `echoing` keeps its last keep_steps steps one by one and folds
older ones per fresh batch; what the planner and the controller read stays complete."""

import threading

import numpy as np
import pytest

from echosim.loop import echoing, load_records
from echosim.loop.recorder import KEEP_STEPS, Recorder


class Clock:
    """Moves 1/8 s per call from the loop's thread (binary-exact times, so float32 storage loses
    nothing); the loader's thread reads it without moving it (the same times in every run)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        if threading.current_thread() is threading.main_thread():
            self.t += 0.125
        return self.t


def _run(keep, policy=3, n=60):
    it = echoing(range(n), policy, keep_steps=keep, clock=Clock())
    for i, _ in enumerate(it):
        it.report(float(1000 - i), probe=0.5 if it.probe_due else None)
    return it.records()


@pytest.mark.parametrize("policy", [1, 3])
def test_folded_records_agree_with_full_ones_per_fresh_batch(policy):
    full, folded = _run(10 ** 6, policy), _run(7, policy)
    assert folded.kept_from > 0 and folded.step_batch.size < full.step_batch.size
    assert 7 <= folded.step_batch.size <= 7 + 3 + policy
    assert folded.n_steps == full.n_steps and folded.n_batches == full.n_batches
    for name in ("load_time", "wait_time", "steps_per_batch", "cap", "epoch", "probe",  # (censored: timing)
                 "first_loss", "start", "seen_progress"):
        assert np.array_equal(getattr(folded, name), getattr(full, name), equal_nan=True), name
    # a folded end is the next request: late by the wrapper's own clock calls (3 ticks here, µs in a real loop)
    assert np.allclose(folded.end, full.end, rtol=0, atol=0.375 + 1e-9)
    s_full, s_folded = full.summary(), folded.summary()
    for k, v in s_full.items():
        if k == "censored_fraction":  # the loader thread's timing, not the loop's clock
            continue
        assert s_folded[k] == (v if isinstance(v, str) else pytest.approx(v, rel=1e-6, nan_ok=True)), k
    kept = folded.step_batch
    assert np.array_equal(folded.loss, full.loss[full.step_batch >= kept[0]])


def test_folded_records_round_trip_and_head(tmp_path):
    r = _run(5)
    back = load_records(r.save(tmp_path / "r.npz"))
    assert back.kept_from == r.kept_from
    for name in ("first_loss", "start", "end", "seen_progress", "loss", "folded_busy"):
        assert np.array_equal(getattr(back, name), getattr(r, name), equal_nan=True), name
    h = r.head(3)  # folded batches only
    assert h.n_batches == 3 and h.kept_from == 3 and h.step_batch.size == 0 and h.n_steps == 9
    assert np.array_equal(h.first_loss, r.first_loss[:3])


class _Tensor:
    """A 0-d 'device tensor' (kept unread by `report`) that counts its reads."""

    shape = ()

    def __init__(self, value, reads):
        self.value, self.reads = value, reads

    def item(self):
        self.reads.append(self.value)
        return self.value

    def detach(self):
        return self


@pytest.mark.parametrize("policy", [1, 3])
@pytest.mark.parametrize("skip_last", [False, True])
def test_losses_reported_as_tensors_are_read_before_their_steps_are_folded(policy, skip_last):
    reads = []
    it = echoing(range(40), policy, keep_steps=4, clock=Clock())
    for i, _ in enumerate(it):
        if not (skip_last and it.is_echo is False and i % 2):  # some steps go unreported
            it.report(_Tensor(float(1000 - i), reads))
    r = it.records()
    assert r.kept_from > 0 and len(reads) == len(set(reads))  # each tensor read once
    steps = np.arange(r.n_steps)
    expect = np.where([skip_last and (j % policy == 0) and j % 2 for j in steps], np.nan, 1000.0 - steps)
    kept = steps[r.n_steps - r.step_batch.size:]
    assert np.array_equal(r.loss, expect[kept], equal_nan=True)
    firsts = np.concatenate([[0], np.cumsum(r.steps_per_batch)[:-1]])
    assert np.array_equal(r.first_loss, expect[firsts], equal_nan=True)


def test_keep_steps_is_checked():
    with pytest.raises(ValueError, match="^keep_steps"):
        echoing([1], keep_steps=0)


def _synthetic(T, K, keep):
    """The recorder of a run of T fresh batches of K steps each, without a loop."""
    rec = Recorder(keep, K)
    t = 0.0
    for b in range(T):
        rec.add_batch(0.01, False, 0, 0.0)
        rec.cap.append(K)
        for _ in range(K):
            rec.step_start.append(t)
            rec.loss.append(1.0)
            rec.step_time.append(0.001)
            t += 0.001
        rec.echo.append(K)
    return rec


@pytest.mark.parametrize("K", [1, 2, 5])
def test_the_memory_bound_holds(K):
    """1.0625 (33 bytes per fresh batch + 36 per kept step) at most (module docstring of recorder)."""
    T, keep = 40_000, 1000
    rec = _synthetic(T, K, keep)
    assert len(rec.loss) <= keep + keep // 2 + K
    assert rec.nbytes() <= 1.0625 * (33 * T + 36 * keep) + 4096
    r = rec.records("fixed" if K > 1 else "sync", K, None, None, ())
    assert r.n_steps == T * K and r.kept_from > 0


def test_the_default_bound_of_a_ten_million_step_run_with_mean_echo_2_is_under_200_MB():
    T = 5 * 10 ** 6
    assert 1.0625 * (33 * T + 36 * KEEP_STEPS) + 4096 < 200e6
