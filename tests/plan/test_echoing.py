"""The echoing iterator: fixed K exactly, greedy echoes exactly while the next batch is
not ready (readiness controlled with events, never with sleeps), errors and the end of
the iterable reach the loop, and the thread stops."""

import threading

import pytest

from echosim.plan.echoing import echoing

TIMEOUT = 30  # seconds; only a guard against a hang, never a timing assumption


def gated(n, gates):
    """Yield 0..n-1; batch i waits for gates[i] (if present) before it is produced."""
    for i in range(n):
        if i in gates:
            assert gates[i].wait(TIMEOUT)
        yield i


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
    assert it2.trace().n == 3


def test_close_stops_the_background_thread():
    it = echoing(iter(int, 1), "greedy")  # an endless iterable
    next(it)
    it.close()
    it._thread.join(TIMEOUT)
    assert not it._thread.is_alive()


@pytest.mark.parametrize("kw, match", [({"policy": "fast"}, "^policy"), ({"policy": 0}, "^policy"),
                                       ({"policy": True}, "^policy"), ({"max_echo": 0}, "^max_echo"),
                                       ({"prefetch": 0}, "^prefetch")])
def test_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        echoing([1], **kw)
