"""The echoing iterator: fixed K exactly, greedy echoes exactly while the next batch is
not ready (readiness controlled with events, never with sleeps), the loop's losses and
times are recorded, epochs, errors and the end of the iterable reach the loop, and the
background thread stops however the loop is left."""

import gc
import math
import threading
import warnings

import numpy as np
import pytest

from echosim.loop.echoing import echoing
from echosim.loop.feed import Feed
from echosim.loop.records import load_records

TIMEOUT = 30  # seconds; only a guard against a hang, never a timing assumption


def gated(n, gates):
    """Yield 0..n-1; batch i waits for gates[i] (if present) before it is produced."""
    for i in range(n):
        if i in gates:
            assert gates[i].wait(TIMEOUT)
        yield i


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize("K", [1, 2, 5])
def test_fixed_K_repeats_every_batch_exactly_K_times(K):
    it = echoing(range(4), K)
    assert list(it) == [i for i in range(4) for _ in range(K)]
    assert it.echo == [K] * 4
    s = it.summary()
    assert s["batches"] == 4 and s["steps"] == 4 * K and s["mean_echo"] == K
    assert len(it.load_time) == 4 and all(t >= 0 for t in it.load_time)


def test_greedy_echoes_while_the_next_batch_is_not_ready():
    gates = {1: threading.Event(), 2: threading.Event()}
    it = echoing(gated(3, gates), "greedy")
    assert [next(it) for _ in range(5)] == [0] * 5  # batch 1 is held back: batch 0 again
    gates[1].set()
    assert it.wait_ready(TIMEOUT)
    assert next(it) == 1  # ready: switch at once
    assert next(it) == 1  # batch 2 held back
    gates[2].set()
    assert it.wait_ready(TIMEOUT)
    assert next(it) == 2
    assert it.wait_ready(TIMEOUT)  # the end of the iterable is ready too
    with pytest.raises(StopIteration):
        next(it)
    assert it.echo == [5, 2, 1]
    assert it.summary()["steps"] == 8


def test_greedy_respects_max_echo():
    gate = {1: threading.Event()}
    it = echoing(gated(2, gate), "greedy", max_echo=3)
    got = [next(it) for _ in range(3)]
    assert got == [0, 0, 0]
    nxt = threading.Thread(target=lambda: got.append(next(it)))
    nxt.start()  # the 4th call must wait for batch 1 (max_echo reached)
    gate[1].set()
    nxt.join(TIMEOUT)
    assert got == [0, 0, 0, 1]
    it.close()


def test_greedy_with_everything_ready_is_sync():
    it = echoing(range(3), "greedy", prefetch=4)
    out = []
    for x in it:
        out.append(x)
        it.wait_ready(TIMEOUT)  # the next batch (or the end) is always ready before the next step
    assert out == [0, 1, 2] and it.echo == [1, 1, 1]


def test_greedy_waits_for_an_overdue_loader_instead_of_echoing():
    """A loader that takes microseconds but has not delivered after a long step was kept from
    running (a consumer holding the GIL), not slowed: greedy waits for it, once per batch, and
    echoes only if it still does not come (a real stall)."""
    clock = FakeClock()
    gate = {1: threading.Event()}
    it = echoing(gated(2, gate), "greedy", clock=clock)
    assert next(it) == 0          # batch 0 took 0 s on the fake clock: overdue after any step
    clock.t = 0.001               # a 1 ms step
    assert next(it) == 0          # it waited (5 ms of real time at most), then echoed
    assert it._overdue_waited
    assert next(it) == 0          # waited once already for this batch: echo without waiting
    gate[1].set()
    assert it.wait_ready(TIMEOUT)
    assert next(it) == 1
    assert not it._overdue_waited  # a new batch: the next overdue gap may wait again
    it.close()


def test_greedy_on_a_fast_loader_with_a_busy_consumer_echoes_about_once():
    """The case that motivated the overdue rule: pure-Python steps hold the GIL, so a
    microsecond loader is 'not ready' after every step; greedy must not echo to its cap."""
    def busy_step():
        x = 0
        for i in range(20_000):
            x += i
        return x

    it = echoing(range(200), "greedy", max_echo=64)
    for _ in it:
        busy_step()
    assert it.summary()["mean_echo"] < 8  # echoing to the cap would give about 64


def test_report_records_the_loss_of_every_step_and_the_first_step_losses():
    it = echoing([10, 20, 30], 2)
    for j, batch in enumerate(it):
        it.report(batch + j)
    r = it.records()
    assert r.loss.tolist() == [10, 11, 22, 23, 34, 35]
    assert r.first_loss.tolist() == [10, 22, 34]
    assert r.step_batch.tolist() == [0, 0, 1, 1, 2, 2]
    assert np.isfinite(r.step_time).all() and (r.step_time >= 0).all()


@pytest.mark.parametrize("loss, match", [("1.0", "number"), (None, "number"), (True, "number"),
                                         ([1.0, 2.0], "number")])
def test_report_refuses_what_is_not_a_number(loss, match):
    it = echoing([1], 1)
    next(it)
    with pytest.raises(ValueError, match=f"^report: .*{match}"):
        it.report(loss)
    it.close()


def test_report_before_a_step_or_twice_per_step_is_an_error():
    it = echoing([1, 2], 1)
    with pytest.raises(ValueError, match="^report: no step"):
        it.report(1.0)
    next(it)
    it.report(1.0)
    with pytest.raises(ValueError, match="^report: the loss of step 0 was reported already"):
        it.report(2.0)
    it.close()


def test_a_nan_loss_is_said_once_and_recorded():
    it = echoing(range(3), 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in it:
            it.report(float("nan"))
    assert len([x for x in w if "diverged" in str(x.message)]) == 1
    assert np.isnan(it.records().loss).all()


def test_epochs_reiterate_a_reiterable():
    assert list(echoing([1, 2], 1, epochs=3)) == [1, 2] * 3
    it = echoing([1, 2, 3], 1, epochs=None)
    got = [next(it) for _ in range(7)]
    it.close()
    assert got == [1, 2, 3, 1, 2, 3, 1]
    assert it.records().epoch.tolist() == [0, 0, 0, 1, 1, 1, 2]


def test_epochs_of_a_one_pass_iterator_are_refused():
    with pytest.raises(ValueError, match="^epochs: .*one-pass iterator"):
        echoing(iter([1, 2]), 1, epochs=2)
    assert list(echoing(iter([1, 2]), 1)) == [1, 2]  # epochs=1 is fine


def test_an_empty_reiterable_with_endless_epochs_ends():
    assert list(echoing([], 1, epochs=None)) == []


def test_paused_time_is_neither_a_step_nor_a_wait():
    clock = FakeClock()
    it = echoing(range(2), 1, clock=clock)
    next(it)
    clock.t += 2.0      # the step: 2 s
    with it.paused():
        clock.t += 100.0  # evaluation
    next(it)
    clock.t += 3.0
    with pytest.raises(StopIteration):
        next(it)
    r = it.records()
    assert r.step_time.tolist() == [2.0, 3.0]
    assert r.step_start.tolist() == [0.0, 2.0]
    assert it.summary()["elapsed_s"] == 5.0


def test_summary_has_units_and_an_empty_run_has_no_utilization():
    s = echoing([], "greedy").summary()
    assert s["batches"] == 0 and math.isnan(s["utilization"]) and math.isnan(s["mean_echo"])
    it = echoing(range(3), 2)
    list(it)
    s = it.summary()
    assert {"elapsed_s", "fresh_batches_per_s", "mean_load_time_s", "mean_step_time_s"} <= set(s)
    assert "throughput" not in s


def test_batch_size_is_read_off_the_batches_or_given():
    it = echoing([np.zeros((8, 3)), np.zeros((8, 3))], 1)
    list(it)
    assert it.records().batch_size == 8
    it = echoing([(np.zeros((5, 2)), np.zeros(5))], 1)
    list(it)
    assert it.records().batch_size == 5
    it = echoing([1, 2], 1, batch_size=64)
    list(it)
    assert it.records().batch_size == 64


def test_records_round_trip_through_a_file(tmp_path):
    it = echoing(range(5), 3)
    for x in it:
        it.report(float(x))
    r = it.records()
    path = r.save(tmp_path / "run.npz")
    back = load_records(path)
    assert back.policy == "fixed" and back.echo == 3
    for name in ("load_time", "wait_time", "steps_per_batch", "step_time", "loss", "step_start"):
        assert np.array_equal(getattr(back, name), getattr(r, name))
    (tmp_path / "junk.npz").write_bytes(b"not a records file")
    with pytest.raises(ValueError, match="^records: .*junk.npz.*not an echosim records file"):
        load_records(tmp_path / "junk.npz")
    with pytest.raises(ValueError, match="does not exist"):
        load_records(tmp_path / "missing.npz")


def test_head_keeps_the_first_fresh_batches_and_their_steps():
    it = echoing(range(6), "greedy", max_echo=3)
    for x in it:
        it.report(float(x))
    r = it.records()
    h = r.head(4)
    assert (h.policy, h.echo, h.batch_size, h.n_batches) == (r.policy, r.echo, r.batch_size, 4)
    assert h.n_steps == int(r.steps_per_batch[:4].sum())
    assert np.array_equal(h.step_batch, r.step_batch[: h.n_steps]) and h.step_batch.max() == 3
    for name in ("load_time", "load_censored", "wait_time", "steps_per_batch", "cap", "epoch"):
        assert np.array_equal(getattr(h, name), getattr(r, name)[:4])
    for name in ("step_start", "step_time", "loss"):
        assert np.array_equal(getattr(h, name), getattr(r, name)[: h.n_steps], equal_nan=True)
    assert np.array_equal(h.first_loss, r.first_loss[:4])
    assert r.head(100).n_batches == r.n_batches and r.head(100).n_steps == r.n_steps
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="^n: expected an integer >= 1"):
            r.head(bad)


def test_head_keeps_the_decisions_taken_before_its_end():
    from echosim.loop.records import Records

    r = echoing(range(3), 1)
    list(r)
    base = r.records()
    fields = {k: getattr(base, k) for k in ("load_time", "load_censored", "wait_time", "steps_per_batch", "cap",
                                            "epoch", "step_batch", "step_start", "step_time", "loss")}
    decisions = ({"batch": 0, "action": "probe"}, {"batch": 2, "action": "keep"})
    rec = Records("auto", None, None, decisions=decisions, **fields)
    assert [d["batch"] for d in rec.head(2).decisions] == [0]
    assert len(rec.head(3).decisions) == 2


def test_a_put_into_a_full_buffer_marks_the_next_batch_censored():
    """While the thread waits with a full buffer, a loader with workers of its own runs ahead,
    so the next measured time is only a lower bound: `_put` says the buffer was full."""
    feed = Feed([], 1, capacity=1, clock=FakeClock())
    assert feed._put("a") is False
    with feed.cond:  # hold the lock so that the taker cannot run before `_put` has looked
        taker = threading.Thread(target=feed.take)
        taker.start()
        assert feed._put("b") is True
    taker.join(TIMEOUT)
    assert list(feed.items) == ["b"]


def test_errors_in_the_iterable_reach_the_loop():
    def broken():
        yield 0
        raise OSError("disk gone")

    it = echoing(broken(), 2)
    assert [next(it), next(it)] == [0, 0]
    with pytest.raises(OSError, match="disk gone"):
        next(it)


def test_empty_iterable_and_trace():
    it = echoing([], "greedy")
    assert list(it) == []
    with pytest.raises(ValueError, match="^trace"):
        it.trace()
    it2 = echoing(range(3), 1)
    list(it2)
    assert it2.records().trace(uncensored=False).n == 3
    assert 1 <= it2.trace().n <= 3 and it2.trace().mode == "resample"  # a fast loader runs ahead


def test_close_stops_the_background_thread():
    it = echoing(iter(int, 1), "greedy")  # an endless iterable
    next(it)
    it.close()
    it._thread.join(TIMEOUT)
    assert not it._thread.is_alive()


def _abandon(kind):
    it = echoing(iter(int, 1), "greedy")  # endless: only stopping can end the thread
    thread = it._thread
    if kind == "break":
        for _ in it:
            break
    elif kind == "exception":
        try:
            for _ in it:
                raise KeyError("in the loop")
        except KeyError:
            pass
    else:
        next(it)
    return thread


@pytest.mark.parametrize("kind", ["break", "exception", "del"])
def test_an_abandoned_iterator_stops_its_thread(kind):
    threads = [_abandon(kind) for _ in range(20)]
    gc.collect()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads)


@pytest.mark.parametrize("kw, match", [({"policy": "fast"}, "^policy"), ({"policy": 0}, "^policy"),
                                       ({"policy": True}, "^policy"), ({"max_echo": 0}, "^max_echo"),
                                       ({"prefetch": 0}, "^prefetch"), ({"epochs": 0}, "^epochs"),
                                       ({"epochs": 1.5}, "^epochs"), ({"batch_size": 0}, "^batch_size"),
                                       ({"auto": {"window": 4}}, "^auto: options of policy 'auto'"),
                                       ({"policy": "auto", "auto": {"window": 1}}, "^auto.window"),
                                       ({"policy": "auto", "auto": {"alpha": 0.9}}, "^auto.alpha"),
                                       ({"policy": "auto", "auto": {"start": 128}}, "^auto.start"),
                                       ({"policy": "auto", "auto": {"size": 3}}, "^auto: unknown option .size."),
                                       ({"clock": lambda: "1.0"}, "^clock: .* returned str"),
                                       ({"clock": lambda: float("nan")}, "^clock: .* returned float nan"),
                                       ({"clock": lambda: 1 / 0}, "^clock: calling it raised ZeroDivisionError")])
def test_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        echoing([1], **kw)


def test_not_an_iterable():
    with pytest.raises(ValueError, match="^iterable"):
        echoing(42)
