"""`echosim.echoing(loader, "auto")` in a real PyTorch loop, with the signals of what an echoed
step is worth (`echosim.loop.torch.EchoMeter`): the paired next-batch progress, a held-out
probe loss and the gradient-noise scale.

The data: scikit-learn's 8x8 digits, upscaled to 16x16, stored as PNG bytes and decoded
(with a random shift as augmentation) by Pillow in a DataLoader worker process; the
model: a small CNN; the optimizer: Adam. Needs the ``torch`` extra (torch, pillow,
scikit-learn).

    python examples/torch_echo_signals.py --batches 200
"""

from __future__ import annotations

import argparse
import io

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import echosim
from echosim.loop.torch import EchoMeter


def encode(images: np.ndarray) -> list[bytes]:
    out = []
    for img in images:
        buf = io.BytesIO()
        Image.fromarray((img * 255 / 16).astype(np.uint8)).resize((16, 16)).save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


class Digits(Dataset):
    """PNG-encoded digits, decoded and (unless seed is None) shifted by up to one pixel at random."""

    def __init__(self, png: list[bytes], labels: np.ndarray, seed: int):
        self.png, self.labels, self.seed = png, labels, seed

    def __len__(self):
        return len(self.png)

    def __getitem__(self, i):
        img = np.asarray(Image.open(io.BytesIO(self.png[i])), dtype=np.float32) / 255.0
        if self.seed is not None:  # augmentation: a random shift, drawn in the worker
            self.rng = getattr(self, "rng", None) or np.random.default_rng([self.seed, torch.initial_seed() % 2**32])
            img = np.roll(img, tuple(self.rng.integers(-1, 2, size=2)), axis=(0, 1))
        return torch.from_numpy(np.ascontiguousarray(img))[None], int(self.labels[i])


def batch_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200, help="fresh batches to train on")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from sklearn.datasets import load_digits

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    digits = load_digits()
    order = np.random.default_rng(args.seed).permutation(len(digits.target))
    train, held = order[:1500], order[1500:]
    png = encode(digits.images)
    data = Digits([png[i] for i in train], digits.target[train], args.seed)
    held_out = Digits([png[i] for i in held], digits.target[held], seed=None)  # no augmentation
    probe = (torch.stack([held_out[j][0] for j in range(len(held_out))]), torch.as_tensor(digits.target[held]))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True, num_workers=args.workers,
                        generator=torch.Generator().manual_seed(args.seed))
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    meter = EchoMeter(model, batch_loss, probe=probe, noise=True)

    it = echosim.echoing(loader, "auto", epochs=None, batch_size=args.batch_size)
    with it:
        for batch in it:
            extra = meter.before_step(it, batch)
            opt.zero_grad()
            loss = batch_loss(model, batch)
            loss.backward()
            extra.update(meter.after_backward(it, batch))
            opt.step()
            it.report(loss.detach(), **extra)
            if len(it.echo) >= args.batches:
                break
    r = it.records()
    s = it.summary()
    noise = r.noise_scale()
    out = {"fresh_batches": r.n_batches, "steps": r.n_steps, "cap": s["auto"]["cap"],
           "decisions": [d["action"] for d in r.decisions],
           "probe_loss_last": float(r.probe[np.isfinite(r.probe)][-1]),
           "paired_progress_reported": int(np.isfinite(r.paired_progress).sum()),
           "noise_scale_last": float(noise[np.isfinite(noise)][-1]) if np.isfinite(noise).any() else float("nan")}
    print(f"{out['fresh_batches']} fresh batches, {out['steps']} steps, cap now {out['cap']}; "
          f"decisions {' '.join(out['decisions']) or 'none yet'}; held-out loss {out['probe_loss_last']:.3f}; "
          f"gradient-noise scale B_noise {out['noise_scale_last']:.0f} examples (B = {args.batch_size})")
    return out


if __name__ == "__main__":
    main()
