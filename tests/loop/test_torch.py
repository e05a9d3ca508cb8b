"""`EchoMeter` against plain torch: the lagged loss is the loss at the snapshot weights, the
squared norms are those of the gradients, the probe comes when due; the example runs."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import echosim  # noqa: E402
from echosim.loop.torch import EchoMeter  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def batch_loss(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def data(n=6, B=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(B, 3, generator=g), torch.randn(B, 1, generator=g)) for _ in range(n)]


@pytest.mark.parametrize("dropout", [False, True])
def test_the_lagged_loss_is_the_loss_at_the_weights_the_previous_batch_started_from(dropout):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(3, 4), torch.nn.ReLU()] + ([torch.nn.Dropout(0.5)] if dropout else []) + \
        [torch.nn.Linear(4, 1)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    meter = EchoMeter(model, batch_loss)
    starts, got = [], []
    it = echosim.echoing(data(), 2)
    for batch in it:
        if not it.is_echo:
            starts.append([p.detach().clone() for p in model.parameters()])
        extra = meter.before_step(it, batch)
        if "lagged_loss" in extra:
            prev = starts[-2]
            saved = [p.detach().clone() for p in model.parameters()]
            with torch.no_grad():
                for p, s in zip(model.parameters(), prev):
                    p.copy_(s)
                model.eval()
                before = float(batch_loss(model, batch))
                for p, s in zip(model.parameters(), saved):
                    p.copy_(s)
                after = float(batch_loss(model, batch))
                model.train()
            lagged = extra["lagged_loss"]
            if dropout:
                assert lagged == pytest.approx((before, after), rel=1e-12)
            else:
                assert lagged == pytest.approx(before, rel=1e-12)
            got.append(lagged)
        opt.zero_grad()
        loss = batch_loss(model, batch)
        loss.backward()
        opt.step()
        it.report(loss.detach(), **extra)
    assert len(got) == 5
    assert np.isfinite(it.records().paired_progress[:5]).all()


def test_grad_sq_are_the_squared_norms_of_the_full_and_half_batch_gradients():
    torch.manual_seed(1)
    model = torch.nn.Linear(3, 1)
    meter = EchoMeter(model, batch_loss, noise=True, noise_every=1)
    it = echosim.echoing(data(n=2), 1, batch_size=8)
    batch = next(it)
    meter.before_step(it, batch)
    model.zero_grad()
    batch_loss(model, batch).backward()
    full = sum(float((p.grad ** 2).sum()) for p in model.parameters())
    b, sq_small, sq_full = meter.after_backward(it, batch)["grad_sq"]
    half = torch.autograd.grad(batch_loss(model, (batch[0][:4], batch[1][:4])), list(model.parameters()))
    assert b == 4 and sq_full == pytest.approx(full, rel=1e-6)  # float32, summed in another order
    assert sq_small == pytest.approx(sum(float((g ** 2).sum()) for g in half), rel=1e-6)
    it.close()


def test_the_probe_comes_when_due():
    model = torch.nn.Linear(3, 1)
    probe = data(n=1, seed=9)[0]
    meter = EchoMeter(model, batch_loss, probe=probe)
    it = echosim.echoing(data(n=10), 1)
    probes = []
    for batch in it:
        extra = meter.before_step(it, batch)
        probes.append("probe" in extra)
        it.report(float(batch_loss(model, batch).detach()), **extra)
    assert [i for i, p in enumerate(probes) if p] == [0, 8]
    with torch.no_grad():
        assert it.records().probe[0] == pytest.approx(float(batch_loss(model, probe)), rel=1e-12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="^model"):
        EchoMeter(object(), batch_loss)
    with pytest.raises(ValueError, match="^batch_loss"):
        EchoMeter(torch.nn.Linear(1, 1), 3)
    with pytest.raises(ValueError, match="^noise_every"):
        EchoMeter(torch.nn.Linear(1, 1), batch_loss, noise_every=0)


def test_a_gpu_style_tensor_loss_is_accepted_and_a_meta_tensor_refused():
    it = echosim.echoing(range(2), 1)
    next(it)
    it.report(torch.tensor(0.5, requires_grad=True) * 1.0)
    next(it)
    with pytest.raises(ValueError, match="^report: loss"):
        it.report(torch.empty((), device="meta"))


def test_the_example_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "torch_echo_signals.py"), "--batches", "40"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "40 fresh batches" in out.stdout or "41 fresh batches" in out.stdout
    assert "held-out loss" in out.stdout and not math.isnan(float(out.stdout.split("held-out loss ")[1].split(";")[0]))


def test_the_loop_example_runs_small():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "torch_loop.py"), "--examples", "512",
                          "--batch-size", "32", "--epochs", "2", "--pilot-batches", "6", "--workers", "1"],
                         capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("trained: 32 fresh batches (32 counted by is_echo)")
    assert lines[1].startswith("verdict of the run: input-bound ")
    assert "recommended:" in out.stdout and lines[-1].startswith("verdict: input-bound ")
    assert "of the time to target" in lines[-1] or "keep sync" in lines[-1]
