"""The planner against a real loader (run on demand; CI runs only --smoke).

    python benchmarks/bench_plan_loader.py            # about 1-2 min on 2 cores
    python benchmarks/bench_plan_loader.py --batches 300 --R 6
    python benchmarks/bench_plan_loader.py --smoke    # 6 batches of 4 small images: checks it runs

A real loader: JPEG decoding and resizing with Pillow (``pip install pillow``; the
images are encoded in memory before the clock starts) in one worker process, batches
returned in order with a bounded number in flight. A real fixed-cost step: single-
threaded matrix products in the training loop. Steps:

1. profile the loader with `echosim.profile` (a consumer that never waits) and the
   step by timing it alone: two traces, in seconds;
2. `echosim.plan` with those traces predicts, for sync, fixed K and greedy, the
   throughput (fresh batches per second), the mean echo and the accelerator's (here:
   the step's) utilisation;
3. each policy is run for real through `echosim.echoing` and measured.

Reports predicted vs measured and the relative errors (target: within 10%). The
machine is shared: the load average is printed; other load shows up as errors.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

harness.one_thread()

import numpy as np


def _images(n: int, size: int, seed: int) -> list[bytes]:
    from PIL import Image

    rng = np.random.default_rng(np.random.SeedSequence(seed))
    out = []
    for _ in range(n):
        base = rng.integers(0, 255, (size // 8, size // 8, 3), dtype=np.uint8)
        img = Image.fromarray(base).resize((size, size), Image.BICUBIC)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


_DATA: list[bytes] = []


def _init(data):
    global _DATA
    _DATA = data


def _decode_batch(args):
    from PIL import Image

    start, B, reps = args
    out = np.empty((B, 32, 32, 3), dtype=np.uint8)
    for i in range(B):
        raw = _DATA[(start + i) % len(_DATA)]
        for _ in range(reps):
            img = Image.open(io.BytesIO(raw)).convert("RGB").resize((32, 32), Image.BILINEAR)
        out[i] = np.asarray(img)
    return out


class ProcessLoader:
    """Batches decoded in worker processes, in order, at most `inflight` requested ahead."""

    def __init__(self, pool, n_batches: int, B: int, reps: int, inflight: int = 2):
        self.pool, self.n, self.B, self.reps, self.inflight = pool, n_batches, B, reps, inflight

    def __iter__(self):
        from collections import deque

        pending = deque()
        nxt = 0
        for _ in range(min(self.inflight, self.n)):
            pending.append(self.pool.submit(_decode_batch, (nxt * self.B, self.B, self.reps)))
            nxt += 1
        while pending:
            batch = pending.popleft().result()
            if nxt < self.n:
                pending.append(self.pool.submit(_decode_batch, (nxt * self.B, self.B, self.reps)))
                nxt += 1
            yield batch


def make_step(reps: int, n: int = 192, kind: str = "matmul", seconds: float = 0.0):
    a = np.random.default_rng(0).standard_normal((n, n))
    if kind == "device":
        def device_step(batch):  # the host waits for an accelerator: a fixed time, no host CPU
            time.sleep(seconds)
            return float(batch[0, 0, 0, 0])

        return device_step

    def step(batch):
        x = a
        for _ in range(reps):
            x = a @ x
            x *= 1.0 / n
        return float(batch[0, 0, 0, 0]) + float(x[0, 0])

    return step


def measure(pool, args, policy, step) -> dict:
    from echosim.planner import echoing

    loader = ProcessLoader(pool, args.batches + 1, args.batch_size, args.decode_reps)
    it = echoing(loader, policy, max_echo=args.max_echo)
    busy = 0.0
    steps = 0
    t_first = None
    for batch in it:
        if t_first is None:
            t_first = time.perf_counter()
        if len(it.echo) >= args.batches:  # batch index args.batches started: stop
            break
        t0 = time.perf_counter()
        step(batch)
        busy += time.perf_counter() - t0
        steps += 1
    elapsed = time.perf_counter() - t_first
    it.close()
    n = len(it.echo)
    return {"throughput": n / elapsed, "mean_echo": steps / n, "utilization": busy / elapsed,
            "trace": it.trace()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=150, help="fresh batches per measured policy")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=256)
    ap.add_argument("--decode-reps", type=int, default=1)
    ap.add_argument("--R", type=float, default=5.0, help="aimed loader/step time ratio")
    ap.add_argument("--max-echo", type=int, default=32)
    ap.add_argument("--step", choices=("device", "matmul"), default="device",
                    help="device: the host waits a fixed time for an accelerator (no host CPU, the usual case); "
                    "matmul: the step computes on the host CPU and competes with the loader for cores")
    harness.add_options(ap, smoke="6 fresh batches of 4 images of 32 px, short profiles, sync only, one seed")
    args = ap.parse_args(argv)
    n_prof, n_step, policies = 60, 60, ("sync", 2, 4, "greedy")
    if args.smoke:
        args.batches, args.batch_size, args.image_size = 6, 4, 32
        n_prof, n_step, policies = 6, 6, ("sync",)
    with harness.Session("bench_plan_loader", args, argv) as session:
        session.results = measure_all(args, n_prof, n_step, policies)
    return 0


def measure_all(args, n_prof, n_step, policies) -> dict:
    """Profile, plan and run every policy; print the tables; returns the rows."""
    from concurrent.futures import ProcessPoolExecutor

    import echosim
    from echosim.pipeline.traces import Trace

    print("## echosim plan vs a real loader\n")
    data = _images(16 if args.smoke else 256, args.image_size, 0)
    with ProcessPoolExecutor(1, initializer=_init, initargs=(data,)) as pool:
        # 1. profile the loader (consumer never waits) and calibrate + profile the step
        prof = echosim.profile(ProcessLoader(pool, n_prof + 2, args.batch_size, args.decode_reps), n_prof, warmup=2)
        t_load = prof.mean
        reps = 1
        step = make_step(reps)
        t = time.perf_counter()
        for _ in range(20):
            step(np.zeros((1, 1, 1, 1)))
        per_rep = (time.perf_counter() - t) / 20
        reps = max(1, round(t_load / args.R / per_rep))
        step = make_step(reps, kind=args.step, seconds=t_load / args.R)
        # time the step while the loader runs, as it will in training (they share the machine)
        import threading

        stop = threading.Event()

        def drain():
            for _ in ProcessLoader(pool, 200, args.batch_size, args.decode_reps):
                if stop.is_set():
                    break

        bg = threading.Thread(target=drain)
        bg.start()
        times = []
        for _ in range(n_step):
            t = time.perf_counter()
            step(np.zeros((1, 1, 1, 1)))
            times.append(time.perf_counter() - t)
        stop.set()
        bg.join()
        step_trace = Trace(np.array(times), "resample")
        loader_trace = Trace(prof.times, "resample")
        print(f"loader (first profile): {loader_trace.n} batches of {args.batch_size} JPEGs ({args.image_size}px) decoded in 1 worker "
              f"process, mean {t_load * 1e3:.1f} ms, cv {np.sqrt(loader_trace.variance) / t_load:.2f}")
        what = f"{reps} products of 192x192 matrices on the host" if args.step == "matmul" else \
            "a wait for an emulated accelerator (time.sleep)"
        print(f"step: {what}, mean {step_trace.mean * 1e3:.2f} ms, "
              f"cv {np.sqrt(step_trace.variance) / step_trace.mean:.2f}; R = {t_load / step_trace.mean:.2f}\n")
        # 2-3. per policy: profile the loader again (the shared machine's load drifts over
        #    minutes), plan, run it for real. The response model (steps_to_target) only sets
        #    how many batches are simulated; throughput, echo and utilisation are the pipeline's.
        rows = []
        for policy in policies:
            prof = echosim.profile(ProcessLoader(pool, n_prof + 2, args.batch_size, args.decode_reps), n_prof,
                                   warmup=2)
            loader_trace = Trace(prof.times, "resample")
            fixed = isinstance(policy, int)
            p = echosim.plan(loader_trace, step_trace, batch_size=args.batch_size,
                             steps_to_target={16: 4000, 256: 600},
                             policies="fixed" if fixed else policy, echoes=[policy] if fixed else None,
                             max_echo=args.max_echo, prefetch=2, seeds=1 if args.smoke else 3)
            c = next(c for c in p.candidates if c["policy"] == ("fixed" if fixed else policy)).as_dict()
            c["loader_ms"] = loader_trace.mean * 1e3
            m = measure(pool, args, policy, step)
            # the same plan from the loader times `echoing` recorded during the run itself
            p2 = echosim.plan(m["trace"], step_trace, batch_size=args.batch_size, steps_to_target={16: 4000, 256: 600},
                              policies="fixed" if fixed else policy, echoes=[policy] if fixed else None,
                              max_echo=args.max_echo, prefetch=2, seeds=1 if args.smoke else 3)
            c2 = next(c for c in p2.candidates if c["policy"] == ("fixed" if fixed else policy)).as_dict()
            c2["loader_ms"] = m["trace"].mean * 1e3
            rows.append((c, m, c2))
    worst, table = {}, []
    for label, k in (("from a profile taken just before the run", 0), ("from the loader times recorded during the run", 2)):
        print(f"\npredicted {label}:\n")
        print("| policy | loader mean | throughput predicted | measured | err | mean echo predicted | measured | err | "
              "utilisation predicted | measured | err |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        worst[label] = 0.0
        for row in rows:
            c, m = row[k], row[1]
            name = {"sync": "sync", "fixed": f"fixed K={c['echo']}", "greedy": "greedy"}[c["policy"]]
            errs = [abs(c["throughput"] - m["throughput"]) / m["throughput"],
                    abs(c["mean_echo"] - m["mean_echo"]) / m["mean_echo"],
                    abs(c["utilization"] - m["utilization"]) / m["utilization"]]
            worst[label] = max(worst[label], *errs)
            table.append({"predicted": label, "policy": name, "loader_ms": c["loader_ms"],
                          **{f"{q}_{w}": v for q in ("throughput", "mean_echo", "utilization")
                             for w, v in (("predicted", c[q]), ("measured", m[q]))},
                          "errors": dict(zip(("throughput", "mean_echo", "utilization"), errs))})
            print(f"| {name} | {c['loader_ms']:.1f} ms | {c['throughput']:.2f} batches/s | {m['throughput']:.2f} batches/s "
                  f"| {errs[0]:.1%} | {c['mean_echo']:.2f} | {m['mean_echo']:.2f} | {errs[1]:.1%} | "
                  f"{c['utilization']:.1%} | {m['utilization']:.1%} | {errs[2]:.1%} |")
    for label, w in worst.items():
        print(f"\nworst relative error, predicted {label}: {w:.1%} (target: within 10%)")
    return {"rows": table, "worst": worst}


if __name__ == "__main__":
    sys.exit(main())
