"""What policy "auto" and its signals cost per step, in CPU time of the training loop's thread.

    python benchmarks/bench_auto_cost.py            # about a minute; the torch rows need the torch extra
    python benchmarks/bench_auto_cost.py --repeats 5
    python benchmarks/bench_auto_cost.py --smoke        # 2 repeats of small loops: checks it runs

Rows (medians over interleaved repeats, A B A B, the load average printed):

1. The decision alone: `Driver` + `AutoEcho` per fresh batch (begin, first_loss, end),
   scripted losses, no loop.
2. The wrapper: `echoing` over an in-memory list (the loader is never late, so greedy
   and auto echo up to their caps only when told), ``report(loss)`` every step, no work
   in the step: main-thread CPU per step (`time.thread_time`) under sync, K = 4, greedy
   and auto; auto minus greedy is the decision's share in a loop.
3. The signals (torch): `EchoMeter.before_step` per fresh batch (lagged loss: a
   parameter copy and one forward pass; probe when due) and ``after_backward`` with
   ``noise=True``, against one training step of the same small CNN (B = 64, 16x16
   images), single-threaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import echosim
from echosim.control import AutoEcho, Driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness


def decision_alone(n=20_000) -> float:
    a = AutoEcho(max_echo=8)
    drv = Driver(a)
    L = 1.0
    t0 = time.thread_time()
    for t in range(n):
        c = drv.begin(t, float(t))
        drv.first_loss(t, L + 0.01 * ((t * 7919) % 13 - 6) / 6)
        L *= 1 - 0.001 * c
        drv.end(t, c)
    return (time.thread_time() - t0) / n


def wrapper(policy, n=3000) -> float:
    data = list(range(n))
    it = echosim.echoing(data, policy, max_echo=4)
    t0 = time.thread_time()
    steps = 0
    for _ in it:
        it.report(1.0 - steps * 1e-5)
        steps += 1
    return (time.thread_time() - t0) / steps


def torch_rows(repeats, n_batches=200):
    import torch

    from echosim.loop.torch import EchoMeter

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def batch_loss(m, b):
        return torch.nn.functional.cross_entropy(m(b[0]), b[1])

    batches = [(torch.randn(64, 1, 16, 16), torch.randint(0, 10, (64,))) for _ in range(n_batches)]
    probe = (torch.randn(256, 1, 16, 16), torch.randint(0, 10, (256,)))
    rows = {"step": [], "lagged": [], "probe": [], "noise": []}
    for _ in range(repeats):
        meter = EchoMeter(model, batch_loss, probe=probe, noise=True, noise_every=1)
        it = echosim.echoing(batches, 1, batch_size=64)
        for b in it:
            t0 = time.thread_time()
            due = it.probe_due
            extra = meter.before_step(it, b)
            t1 = time.thread_time()
            opt.zero_grad()
            loss = batch_loss(model, b)
            loss.backward()
            t2 = time.thread_time()
            extra.update(meter.after_backward(it, b))
            t3 = time.thread_time()
            opt.step()
            t4 = time.thread_time()
            it.report(loss.detach(), **extra)
            rows["step"].append(t2 - t1 + t4 - t3)
            rows["probe" if due else "lagged"].append(t1 - t0)
            rows["noise"].append(t3 - t2)
    return {k: harness.median(v) for k, v in rows.items()}


def cpu_cost(repeats: int = 9, batches: int = 300, echo: int = 8) -> str:
    """auto's CPU cost per step behind a sleeping loader (``bench_auto.py --cpu``): the main
    thread's CPU time (``time.thread_time``) inside echoing's calls (``next`` and
    ``report``) per step, greedy against auto on the same scripted inputs, interleaved;
    and AutoEcho's own calls alone.

    The scripted loss falls linearly in the fresh-batch index (it does not depend on K), so
    auto keeps greedy's caps except in its probe blocks, and the two take about the same
    steps per fresh batch (printed): per-fresh-batch costs are spread alike."""
    import numpy as np

    t_load, t_step = 0.004, 0.0004

    class Slow:
        def __iter__(self):
            for t in range(batches + 1):
                time.sleep(t_load)
                yield t

    def scripted(t: int) -> float:
        return 2.0 - 0.002 * t + 1e-4 * ((t * 7919) % 13) / 13

    def loop(policy):
        it = echosim.echoing(Slow(), policy, max_echo=echo)
        cpu, n, tc = 0.0, 0, time.thread_time
        while True:
            c0 = tc()
            try:
                b = next(it)
            except StopIteration:
                cpu += tc() - c0
                break
            cpu += tc() - c0
            n += 1
            time.sleep(t_step)  # the accelerator: the step yields the core, as a real one does
            c0 = tc()
            it.report(scripted(b))
            cpu += tc() - c0
        it.close()
        return 1e6 * cpu / n, n / len(it.echo)

    rows = harness.interleave({"greedy": lambda: loop("greedy"), "auto": lambda: loop("auto")}, repeats)
    # AutoEcho alone: the same scripted stream, K_t = echo
    n = 20_000
    alone = []
    for _ in range(repeats):
        drv = Driver(AutoEcho(max_echo=64))
        c0 = time.thread_time()
        for t in range(n):
            cap = drv.begin(t, 0.01 * t)
            drv.first_loss(t, scripted(t))
            drv.end(t, min(cap, echo))
        alone.append(1e6 * (time.thread_time() - c0) / n)
    def q(v):
        st = harness.summary(v)
        return st["median"], st["iqr"]

    out = ["| what (µs of main-thread CPU) | median | IQR | steps per fresh batch |", "|---|---:|---:|---:|"]
    for p, v in rows.items():
        m, iqr = q([x[0] for x in v])
        out.append(f"| inside echoing's next + report, per step, {p} | {m:.1f} | {iqr:.1f} | "
                   f"{np.median([x[1] for x in v]):.2f} |")
    m, iqr = q(alone)
    out.append(f"| Driver + AutoEcho (begin, first_loss, end), per fresh batch, alone | {m:.2f} | {iqr:.2f} | |")
    ga, aa = np.median([x[0] for x in rows["greedy"]]), np.median([x[0] for x in rows["auto"]])
    out.append(f"\nauto − greedy: {aa - ga:+.1f} µs of CPU per step (the bound: <= 20 µs per step).")
    return (f"{repeats} repeats, greedy and auto interleaved; {batches} fresh batches of {1e3 * t_load:g} ms each, "
            f"a {1e3 * t_step:g} ms sleeping step, max_echo {echo}; AutoEcho alone: {n} scripted fresh batches.\n\n"
            + "\n".join(out) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    harness.add_options(ap, smoke="2 repeats of small loops (and 10 torch batches)")
    args = ap.parse_args(argv)
    n_dec, n_wrap, n_torch = (500, 100, 10) if args.smoke else (20_000, 3000, 200)
    if args.smoke:
        args.repeats = 2
    with harness.Session("bench_auto_cost", args, argv) as session:
        dec = [decision_alone(n_dec) for _ in range(args.repeats)]
        per = harness.interleave({p: (lambda p=p: wrapper(p, n_wrap)) for p in ("sync", 4, "greedy", "auto")},
                                 args.repeats)
        us = lambda x: 1e6 * x
        print(f"{args.repeats} repeats\n")
        print("| what | median CPU per unit (µs) | IQR (µs) |\n|---|---:|---:|")
        rows = {"decision alone (Driver + AutoEcho), per fresh batch": harness.summary(dec)}
        rows.update({f"echoing + report, per step, policy {p}": harness.summary(v) for p, v in per.items()})
        for what, st in rows.items():
            print(f"| {what} | {us(st['median']):.2f} | {us(st['iqr']):.2f} |")
        auto_minus = harness.median(per["auto"]) - harness.median(per["greedy"])
        print(f"| auto minus greedy, per step | {us(auto_minus):.2f} | |")
        session.results = {"unit": "seconds of thread CPU", "rows": rows, "auto_minus_greedy": auto_minus}
        try:
            t = torch_rows(max(1, args.repeats // 3), n_torch)
        except ImportError:
            print("\n(torch not installed: the signal rows need the torch extra)")
            session.results["torch"] = None
            return
        print(f"| one training step of the CNN (forward, backward, Adam) | {us(t['step']):.0f} | |")
        for k, what in (("lagged", "EchoMeter.before_step: lagged loss (copy + forward), per fresh batch"),
                        ("probe", "EchoMeter.before_step with the probe (256 examples) due"),
                        ("noise", "EchoMeter.after_backward: grad_sq (half-batch backward)")):
            print(f"| {what} | {us(t[k]):.0f} ({t[k] / t['step']:.0%} of a step) | |")
        session.results["torch"] = t


if __name__ == "__main__":
    main()
