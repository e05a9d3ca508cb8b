"""echoing as a drop-in for the loader it wraps: the thread starts at the first request and
is stopped before the interpreter exits (the process keeps its own exit status), len()
where the steps are known, an on_epoch hook for samplers that reshuffle, losses reported
as tensors read lazily, an opt-in synchronise before each clock reading."""

import math
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

from echosim.loop.echoing import echoing
from echosim.loop.records import load_records

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30  # seconds; only a guard against a hang

# ---- the thread: lazy start, stopped at interpreter exit


def test_the_thread_starts_at_the_first_request_not_at_construction():
    it = echoing(range(3), 1)
    assert it._thread.ident is None
    assert next(it) == 0 and it._thread.ident is not None
    it.close()
    it._thread.join(TIMEOUT)
    assert not it._thread.is_alive()
    never = echoing(range(3), 1)
    never.close()  # closing one never started is fine, and it yields nothing more
    assert list(never) == [] and never._thread.ident is None


_SCRIPT = """
import sys, time
import echosim
kind, when, how = sys.argv[1:]
if kind == "python":
    def slow():
        while True:
            time.sleep(0.01)
            yield [0.0] * 8
    loader = slow()
else:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.randn(4096, 4)), batch_size=8, num_workers=int(kind[-1]))
it = echosim.echoing(loader, 2)
if when == "abandoned":
    for i, batch in enumerate(it):
        if i == 5:
            break
if how == "exit":
    sys.exit(3)
raise KeyError("the model could not be built")
"""


@pytest.mark.parametrize("kind, when, how", [
    ("python", "never", "raise"), ("python", "abandoned", "exit"),
    ("torch0", "never", "raise"), ("torch0", "abandoned", "raise"),
    ("torch2", "never", "exit"), ("torch2", "never", "raise"), ("torch2", "abandoned", "exit"),
    ("torch2", "abandoned", "raise")])
def test_a_script_that_leaves_keeps_its_exit_status_and_traceback(tmp_path, kind, when, how):
    if kind.startswith("torch"):
        pytest.importorskip("torch")
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(script), kind, when, how], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert "terminate called" not in out.stderr
    if how == "exit":
        assert out.returncode == 3, out.stderr[-2000:]
    else:
        assert out.returncode == 1, out.stderr[-2000:]
        assert "KeyError: 'the model could not be built'" in out.stderr


# ---- len, like the loader's


def test_len_is_the_steps_where_the_policy_fixes_them():
    assert len(echoing(range(5), 3)) == 15 and len(echoing(range(5), "sync", epochs=2)) == 10
    assert len(list(echoing(range(5), 3))) == 15
    it = echoing(range(5), "greedy")
    assert it.fresh_batches == 5 and bool(it)
    with pytest.raises(TypeError, match="fresh_batches is 5"):
        len(it)
    with pytest.raises(TypeError, match="has no len"):
        len(echoing((i for i in range(3)), 2))
    with pytest.raises(TypeError, match="epochs=None"):
        len(echoing(range(3), 2, epochs=None))
    assert echoing(range(3), 2, epochs=None).fresh_batches is None
    assert list(echoing((i for i in range(2)), 2)) == [0, 0, 1, 1]  # list() reads no length


# ---- on_epoch: a sampler reshuffles every pass


class Sampled:
    """A re-iterable whose pass depends on the epoch set last, like a DistributedSampler's loader."""

    def __init__(self, n):
        self.n, self.epoch, self.sampler = n, None, self

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        return iter([(self.epoch, i) for i in range(self.n)])

    def __len__(self):
        return self.n


def test_on_epoch_is_called_before_every_pass():
    loader = Sampled(2)
    assert list(echoing(loader, 1, epochs=3, on_epoch=loader.set_epoch)) == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


def test_a_loader_with_set_epoch_reiterated_without_a_hook_is_warned_of():
    with pytest.warns(RuntimeWarning, match="on_epoch=loader.sampler.set_epoch"):
        echoing(Sampled(2), 1, epochs=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        echoing(Sampled(2), 1)  # one pass: the user sets the epoch around it
        echoing(Sampled(2), 1, epochs=2, on_epoch=print)


def test_a_hook_that_raises_reaches_the_loop_named_and_leaves_no_thread():
    def set_epoch(e):
        if e == 1:
            raise RuntimeError("no such epoch")

    it = echoing(range(2), 1, epochs=3, on_epoch=set_epoch)
    got = []
    with pytest.raises(RuntimeError, match="no such epoch") as info:
        for b in it:
            got.append(b)
    assert got == [0, 1]
    assert any("on_epoch hook" in n and "set_epoch" in n and "epoch 1" in n for n in info.value.__notes__)
    it._thread.join(TIMEOUT)
    assert not it._thread.is_alive()
    assert list(it) == []


@pytest.mark.parametrize("kw", [{"on_epoch": 3}, {"sync": "cuda"}])
def test_hooks_must_be_callables(kw):
    with pytest.raises(ValueError, match=f"^{next(iter(kw))}: expected a callable"):
        echoing([1], **kw)


# ---- report: a tensor is kept and read later


class LazyScalar:
    """A 0-d 'device tensor' that counts how often its value is read."""

    shape = ()

    def __init__(self, value, reads):
        self.value, self.reads = value, reads

    def item(self):
        self.reads.append(self.value)
        return self.value

    def detach(self):
        return self


def test_a_tensor_loss_is_read_when_the_records_are_taken():
    reads = []
    it = echoing(range(3), 2)
    for i, _ in enumerate(it):
        it.report(LazyScalar(float(i), reads))
    assert reads == []  # no read, so no device synchronisation, in the loop
    r = it.records()
    assert r.loss.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and len(reads) == 6
    with pytest.raises(ValueError, match="reported already"):
        it.report(1.0)


def test_auto_reads_the_first_step_loss_of_each_fresh_batch_only():
    reads = []
    it = echoing(range(3), "auto", auto={"start": 2}, max_echo=2)
    for i, _ in enumerate(it):
        it.report(LazyScalar(float(i), reads))
        it.wait_ready(TIMEOUT)
    in_loop = list(reads)
    r = it.records()
    assert in_loop == [float(j) for j in r.first_step] and r.loss.tolist() == [float(j) for j in range(r.n_steps)]


def test_many_unread_losses_are_read_in_bulk_and_a_nan_said_when_read():
    reads = []
    it = echoing(range(1100), 1)
    with pytest.warns(RuntimeWarning, match="diverged"):
        for i, _ in enumerate(it):
            it.report(LazyScalar(math.nan if i == 3 else 1.0, reads))
            if i == 1022:
                assert reads == []
    assert len(reads) >= 1024


def test_a_torch_loss_that_requires_grad_is_taken_without_a_warning():
    torch = pytest.importorskip("torch")
    w = torch.tensor(2.0, requires_grad=True)
    it = echoing(range(2), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in it:
            loss = w * 1.5
            it.report(loss)
            loss.backward()
        assert it.records().loss.tolist() == [3.0, 3.0]


# ---- sync: before each reading of the loop's clock, never in the background thread


def test_sync_is_called_before_every_reading_of_the_loops_clock(tmp_path):
    main = threading.current_thread()
    state = {"synced": False, "calls": 0, "unsynced_readings": 0, "off_thread": 0, "armed": False}

    def sync():
        state["synced"] = True
        state["calls"] += 1
        state["off_thread"] += threading.current_thread() is not main

    def clock():
        if threading.current_thread() is main and state["armed"]:
            state["unsynced_readings"] += not state["synced"]
            state["synced"] = False
        return 0.0

    it = echoing(range(4), 2, clock=clock, sync=sync)
    state["armed"] = True  # the readings of the loop, from its first request on
    for _ in it:
        it.report(1.0)
    r = it.records()
    assert state["calls"] >= r.n_steps and state["unsynced_readings"] == 0 and state["off_thread"] == 0
    assert r.clock.endswith("after " + sync.__module__ + "." + sync.__qualname__ + "()")
    assert load_records(r.save(tmp_path / "r.npz")).clock == r.clock
    assert echoing(range(2), 1).records().clock == "time.perf_counter"


def test_is_echo_tells_a_repeated_batch_from_its_first_step():
    it = echoing(range(3), 3)
    seen = [(batch, it.is_echo) for batch in it]
    assert seen == [(b, k > 0) for b in range(3) for k in range(3)]
    it = echoing(range(4), "greedy", max_echo=5)
    firsts = [batch for batch in it if not it.is_echo]
    assert firsts == [0, 1, 2, 3]


def test_the_pilot_passes_sync_on_and_its_records_name_it():
    from echosim.loop.pilot import pilot

    calls = []

    def sync():
        calls.append(threading.current_thread())

    records = pilot(lambda batch: 1.0, list(range(8)), policies=("sync", 2), batches=4, rounds=1, sync=sync)
    assert calls and all(t is threading.current_thread() for t in calls)
    assert all(r.clock.endswith(f"after {sync.__module__}.{sync.__qualname__}()") for r in records)
