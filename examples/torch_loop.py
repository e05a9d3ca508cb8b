"""`echosim.echoing` around a PyTorch DataLoader, in a training loop you can copy: is my
loader the bottleneck, and what would echoing buy?

1. train through ``echosim.echoing(loader, ...)`` as you would through the loader
   (``len()``, a sampler reshuffled every epoch, the loss reported as a tensor without a
   device synchronisation, ``it.is_echo`` to tell a repeated batch), and print the
   verdict of the run: how input-bound it was;
2. pilot: time your own step on your own loader under a few echo policies;
3. plan from the pilot's records, and print the verdict with what echoing is predicted
   to save (from your steps to target; the ones given by default are illustrative).

The data: a synthetic regression set whose examples are "decoded" (a small FFT each,
standing in for image decoding) in DataLoader worker processes; the model: an MLP; the
optimizer: SGD with momentum. On a GPU, the step times are the device's: `echoing`
calls ``torch.cuda.synchronize`` before each clock reading (``sync=``).

    python examples/torch_loop.py --epochs 2 --workers 2
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import echosim


class Decoded(Dataset):
    """n examples of d features; each costs `work` FFTs to 'decode' (the laggard part)."""

    def __init__(self, n: int, d: int, work: int, seed: int):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((n, d)).astype(np.float32)
        self.w = rng.standard_normal(d).astype(np.float32)
        self.work = work

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        for _ in range(self.work):  # decoding and augmentation
            x = np.fft.irfft(np.fft.rfft(x), n=len(x)).astype(np.float32)
        return torch.from_numpy(x), torch.tensor(float(x @ self.w))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=4096)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--echo", default="greedy", help="the echo policy of the training run: sync, greedy, auto or K")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    ap.add_argument("--work", type=int, default=6, help="the cost of decoding one example (FFTs)")
    ap.add_argument("--pilot-batches", type=int, default=40, help="fresh batches per policy in the pilot")
    ap.add_argument("--steps-to-target", default="64=5200,1024=900",
                    help="your model's steps to target without echoing at two batch sizes, B=STEPS,... "
                         "(the default is illustrative: replace it with yours)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    policy = int(args.echo) if args.echo.isdigit() else args.echo

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else None  # time the device, not the kernel launches
    data = Decoded(args.examples, 32, args.work, args.seed)
    # one replica here; under torch.distributed, num_replicas and rank come from the process group
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(batch):
        x, y = (t.to(device, non_blocking=True) for t in batch)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        return loss.detach()  # a tensor: echoing reads it when it needs it, not every step

    # ---- 1. train through echoing, as through the loader
    it = echosim.echoing(loader, policy, epochs=args.epochs, on_epoch=sampler.set_epoch,
                         batch_size=args.batch_size, sync=sync)
    fresh = 0
    with it:
        for batch in it:
            loss = step(batch)
            it.report(loss)
            fresh += not it.is_echo  # a progress bar over fresh batches: tqdm(total=it.fresh_batches)
    print(f"trained: {it.fresh_batches} fresh batches ({fresh} counted by is_echo), "
          f"{it.records().n_steps} steps; {it!r}")
    print(f"verdict of the run: {it.verdict()}")

    # ---- 2. pilot: your step on your loader, a few policies in short interleaved segments
    records = echosim.pilot(step, loader, batches=args.pilot_batches, batch_size=args.batch_size, sync=sync)
    print("pilot:", ", ".join(f"{r.policy}{'' if r.echo in (None, 1) else ' K=' + str(r.echo)} "
                              f"{r.summary()['fresh_batches_per_s']:.0f} fresh batches/s" for r in records[:4]))

    # ---- 3. plan from the pilot's records, and the verdict with its prediction
    steps = {int(b): int(s) for b, s in (kv.split("=") for kv in args.steps_to_target.split(","))}
    plan = echosim.plan(records=records, batch_size=args.batch_size, steps_to_target=steps, seeds=3)
    print(plan.table())
    verdict = echosim.verdict(records, plan=plan)
    print(f"verdict: {verdict}")
    return {"fresh_batches": it.fresh_batches, "counted": fresh, "steps": it.records().n_steps,
            "verdict": str(verdict), "recommended": plan.recommended["policy"]}


if __name__ == "__main__":
    main()
