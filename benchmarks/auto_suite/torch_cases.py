"""Two PyTorch jobs through ``echosim.echoing`` (needs torch and Pillow), neither used while
designing the controller:

- ``torch-digits-momentum``: sklearn's digits upscaled to 20x20 and stored once as PNG; a
  small CNN (conv 8, conv 16, linear) with ``torch.optim.SGD(momentum=0.9)``;
- ``torch-shapes-adam``: procedurally drawn 20x20 grey images of four shapes (disc,
  square, triangle, cross) of random size, place and rotation over a random striped
  texture with noise, stored once as JPEG; the same CNN shape with ``torch.optim.Adam``.

Each image is opened, decoded and augmented by Pillow in a ``DataLoader`` worker process
(``num_workers=1``, persistent), which also sleeps ``t_load / B`` per image: the slow
pipeline. Multi-epoch (``echoing(loader, epochs=None)`` re-iterates the DataLoader). The
augmentation of the c-th fetch of image i comes from ``default_rng([seed, i, c])`` and the
shuffle from a seeded generator, so every policy at a seed sees the same fresh batches.
The parameters are copied into a preallocated buffer after each fresh batch inside
``it.paused()`` (a copy of a few thousand floats, well under a millisecond: the worker
process keeps loading meanwhile, its clock cannot be frozen, so the pause is kept that
short) and evaluated on the validation split after the run.

The lrs are the best of K = 1 scans without sleeps (``bench_auto_suite.py --scan
--time-scale 0``; fresh batches to target per seed, budget 320):

- digits, SGD(momentum=0.9), to 0.3: lr 0.005: 168, 168; 0.01: 97, 91; 0.02: 86, 72;
  0.05: 315, 53; 0.1: 316, never. To 0.1: 0.01: 315, 284; 0.02: 315, 213; 0.035: 228,
  289. Kept 0.02; to the case's target 0.15 it takes 145, 167, 164 (seeds 0-2).
- shapes, Adam, to 0.3 nobody arrives in 320 batches (final loss 0.62, 0.52, 0.48, 0.48
  at lr 0.001, 0.002, 0.004, 0.008); to 0.6: 0.004: 145, 239; 0.008: 259, 139; 0.016:
  never, 320 (diverges at seed 0). 0.004 and 0.008 tie; kept 0.004, the grid's interior.
"""

from __future__ import annotations

import io
import json
import math
import os
import time
from pathlib import Path

import harness  # benchmarks/ is on sys.path: the suite's driver puts it there
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw
from torch.utils.data import DataLoader, Dataset

from .loop import policy_label, probe_due, records_of, signals_supported

torch.set_num_threads(1)

SIZE = 20


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "echosim" / "auto_suite"


# ---- the data, written once

def _write(root: Path, images, labels, fmt: str, split: dict) -> None:
    (root / "img").mkdir(parents=True, exist_ok=True)
    files = []
    ext = "png" if fmt == "PNG" else "jpg"
    for i, a in enumerate(images):
        buf = io.BytesIO()
        Image.fromarray(a, mode="L").save(buf, format=fmt, **({"quality": 85} if fmt == "JPEG" else {}))
        name = f"img/{i:05d}.{ext}"
        (root / name).write_bytes(buf.getvalue())
        files.append(name)
    tr = split["train"]
    pix = np.stack([np.asarray(Image.open(root / files[i]), dtype=np.float64) / 255.0 for i in tr[:500]])
    info = {"files": files, "labels": [int(x) for x in labels], **{k: [int(i) for i in v] for k, v in split.items()},
            "mean": float(pix.mean()), "std": float(pix.std())}
    tmp = root / ".manifest.tmp"
    tmp.write_text(json.dumps(info), encoding="utf-8")
    os.replace(tmp, root / "manifest.json")  # written last: its presence means the cache is complete


def _split(labels, n_probe: int, n_val: int) -> dict:
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    tr, rest = train_test_split(idx, test_size=n_probe + n_val, stratify=labels, random_state=0)
    pr, va = train_test_split(rest, test_size=n_val, stratify=np.asarray(labels)[rest], random_state=0)
    return {"train": tr, "probe": pr, "val": va}


def build_digits(cache: Path) -> Path:
    """sklearn's digits upscaled bicubically to 20x20, as PNG; 1,297 train / 100 probe / 400 val."""
    from sklearn.datasets import load_digits

    root = Path(cache) / f"digits{SIZE}-png"
    if (root / "manifest.json").exists():
        return root
    d = load_digits()
    imgs = [np.asarray(Image.fromarray(np.round(a * 255.0 / 16.0).astype(np.uint8), mode="L")
                       .resize((SIZE, SIZE), Image.BICUBIC)) for a in d.images]
    _write(root, imgs, d.target, "PNG", _split(d.target, 100, 400))
    return root


def draw_shape(rng: np.random.Generator, label: int) -> np.ndarray:
    """One 20x20 image (drawn at 4x and downsampled): a striped texture with noise and a shape."""
    n = SIZE * 4
    yy, xx = np.mgrid[0:n, 0:n] / n
    theta, freq, phase = rng.uniform(0, np.pi), rng.uniform(2, 6), rng.uniform(0, 2 * np.pi)
    tex = 0.5 + 0.25 * np.sin(2 * np.pi * freq * (xx * np.cos(theta) + yy * np.sin(theta)) + phase)
    img = Image.fromarray(np.uint8(255 * np.clip(tex * rng.uniform(0.3, 0.7), 0, 1)), mode="L")
    draw = ImageDraw.Draw(img)
    r = rng.uniform(0.18, 0.32) * n
    cx, cy = rng.uniform(r + 2, n - r - 2, 2)
    rot = rng.uniform(0, 2 * np.pi)
    ink = int(rng.uniform(190, 255))
    if label == 0:    # disc
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=ink)
    elif label == 1:  # square
        pts = [(cx + r * math.cos(rot + k * math.pi / 2), cy + r * math.sin(rot + k * math.pi / 2)) for k in range(4)]
        draw.polygon(pts, fill=ink)
    elif label == 2:  # triangle
        pts = [(cx + r * math.cos(rot + k * 2 * math.pi / 3), cy + r * math.sin(rot + k * 2 * math.pi / 3))
               for k in range(3)]
        draw.polygon(pts, fill=ink)
    else:             # cross
        for a in (rot, rot + math.pi / 2):
            dx, dy = r * math.cos(a), r * math.sin(a)
            draw.line([(cx - dx, cy - dy), (cx + dx, cy + dy)], fill=ink, width=max(2, int(r / 3)))
    a = np.asarray(img.resize((SIZE, SIZE), Image.BILINEAR), dtype=np.float64)
    a = a + rng.normal(0, 18, a.shape)
    return np.uint8(np.clip(a, 0, 255))


def build_shapes(cache: Path, n: int = 2400) -> Path:
    """n images of four shapes (balanced), drawn from ``default_rng([2026, i])``, as JPEG
    (quality 85); 1,700 train / 200 probe / 500 val."""
    root = Path(cache) / f"shapes{SIZE}-{n}-jpeg"
    if (root / "manifest.json").exists():
        return root
    labels = np.arange(n) % 4
    imgs = [draw_shape(np.random.default_rng([2026, i]), int(labels[i])) for i in range(n)]
    _write(root, imgs, labels, "JPEG", _split(labels, 200, 500))
    return root


class Images(Dataset):
    """Opens, decodes and (training) augments one image per item with Pillow; sleeps
    ``sleep`` seconds per item (the slow pipeline). Returns (1x20x20 tensor, label)."""

    def __init__(self, root: Path, split: str, seed: int, augment: str | None, sleep: float = 0.0):
        info = json.loads((Path(root) / "manifest.json").read_text(encoding="utf-8"))
        self.root = Path(root)
        self.items = [(info["files"][i], info["labels"][i]) for i in info[split]]
        self.mean, self.std = info["mean"], info["std"]
        self.seed, self.augment, self.sleep = int(seed), augment, float(sleep)
        self.fetches = np.zeros(len(self.items), dtype=np.int64)  # per worker process copy

    def __len__(self):
        return len(self.items)

    def _augment(self, img: Image.Image, rng) -> Image.Image:
        if self.augment == "affine":   # digits: rotation +-12 deg, scale +-10%, shift +-2 px
            theta, s = math.radians(rng.uniform(-12, 12)), rng.uniform(0.9, 1.1)
            tx, ty = rng.uniform(-2, 2, 2)
            c = (SIZE - 1) / 2.0
            a, b, d, e = math.cos(theta) / s, math.sin(theta) / s, -math.sin(theta) / s, math.cos(theta) / s
            x0, y0 = c + tx, c + ty
            return img.transform(img.size, Image.AFFINE, (a, b, c - a * x0 - b * y0, d, e, c - d * x0 - e * y0),
                                 resample=Image.BILINEAR)
        # shapes: a flip, a quarter turn, a brightness jitter
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        k = int(rng.integers(4))
        if k:
            img = img.transpose((Image.ROTATE_90, Image.ROTATE_180, Image.ROTATE_270)[k - 1])
        gain = rng.uniform(0.8, 1.2)
        return img.point(lambda v: min(255, int(v * gain)))

    def __getitem__(self, i):
        t0 = time.perf_counter()
        name, label = self.items[i]
        with Image.open(self.root / name) as f:
            img = f.convert("L")
        if self.augment:
            rng = np.random.default_rng([self.seed, int(i), int(self.fetches[i])])
            self.fetches[i] += 1
            img = self._augment(img, rng)
        x = torch.from_numpy((np.asarray(img, dtype=np.float32) / 255.0 - self.mean) / self.std)[None]
        rest = self.sleep - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)
        return x, label


def tensors(root: Path, split: str):
    ds = Images(root, split, 0, None)
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs), torch.tensor(ys)


def make_model(seed: int, classes: int) -> torch.nn.Module:
    torch.manual_seed(int(seed))  # the same initial weights for every policy at a seed
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),    # 8 x 10 x 10
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),   # 16 x 5 x 5
        torch.nn.Flatten(), torch.nn.Linear(16 * 25, classes))


def batch_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


class Snapshots:
    """The parameters after each fresh batch, copied into one preallocated buffer."""

    def __init__(self, model, n: int):
        self.params = list(model.parameters())
        self.buf = torch.zeros((n + 1, sum(p.numel() for p in self.params)))
        self.n = 0

    @torch.no_grad()
    def take(self):
        torch.cat([p.reshape(-1) for p in self.params], out=self.buf[self.n])
        self.n += 1

    @torch.no_grad()
    def evaluate(self, model, X, y) -> np.ndarray:
        out = np.empty(self.n)
        for k in range(self.n):
            torch.nn.utils.vector_to_parameters(self.buf[k], self.params)
            out[k] = F.cross_entropy(model(X), y).item()
        return out


class LaggedLoss:
    """The hand-written lagged loss (when echosim.loop.torch is absent): at each fresh batch's
    first step, the batch's loss at the weights the previous fresh batch started from (a
    snapshot taken then), by one forward pass with `torch.func.functional_call`."""

    def __init__(self, model):
        self.model = model
        self.prev = None

    @torch.no_grad()
    def measure(self, it, batch, first: bool) -> dict:
        if not first:
            return {}
        out = {}
        if self.prev is not None:
            out["lagged_loss"] = F.cross_entropy(torch.func.functional_call(self.model, self.prev, (batch[0],)),
                                                 batch[1]).item()
        self.prev = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        return out


def _echo_meter(model, probe):
    """echosim's EchoMeter (``before_step`` for the lagged loss and the probe), if it exists."""
    try:
        from echosim.loop.torch import EchoMeter
    except ImportError:
        return None
    try:
        meter = EchoMeter(model, batch_loss, probe=probe)
    except TypeError:  # an earlier form without held-out data
        meter = EchoMeter(model, batch_loss)
    return meter if hasattr(meter, "before_step") or hasattr(meter, "measure") else None


def _shutdown(loader: DataLoader) -> None:
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None


class TorchTask:
    kind = "torch"
    metric = "validation loss"
    smooth = True

    def __init__(self, name, title, *, data, optimizer, lr, B=32, target, budget, t_load=0.048, t_step=0.008,
                 max_echo=64, cache=None):
        self.name, self.title, self.data, self.optimizer = name, title, data, optimizer
        self.lr, self.B, self.target, self.budget = lr, B, target, budget
        self.t_load, self.t_step, self.max_echo = t_load, t_step, max_echo
        self.cache = Path(cache) if cache else default_cache()
        self._root = None
        self._val = None
        self._probe = None

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = build_digits(self.cache) if self.data == "digits" else build_shapes(self.cache)
        return self._root

    @property
    def classes(self) -> int:
        return 10 if self.data == "digits" else 4

    def describe(self) -> str:
        data = ("sklearn digits upscaled to 20x20 PNG, 1,297 train / 400 val, random affine augmentation"
                if self.data == "digits" else
                "procedural shapes (4 classes) over striped textures, 20x20 JPEG, 1,700 train / 500 val, "
                "flip / quarter-turn / brightness augmentation")
        opt = "SGD(momentum=0.9)" if self.optimizer == "momentum" else "Adam"
        n_train = 1297 if self.data == "digits" else 1700
        return (f"CNN conv8-conv16-linear, {opt}, lr = {self.lr:g}; {data}; decoded and augmented by Pillow in "
                f"1 DataLoader worker; B = {self.B} ({n_train // self.B} fresh batches per epoch); target "
                f"validation loss {self.target:g}; budget {self.budget} fresh batches "
                f"({self.budget * self.B / n_train:.1f} epochs)")

    def batches(self, seed: int, n: int):
        return None  # the DataLoader draws them, seeded

    def make_optimizer(self, model):
        if self.optimizer == "momentum":
            return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=0.9)
        return torch.optim.Adam(model.parameters(), lr=self.lr)

    def run(self, policy, seed: int, *, scale: float = 1.0, signals: bool = False, auto: dict | None = None,
            budget: int | None = None) -> dict:
        import echosim

        from .loop import Run

        if self._val is None:
            self._val, self._probe = tensors(self.root, "val"), tensors(self.root, "probe")
        N = budget or self.budget
        load0 = harness.load()[0]
        model = make_model(seed, self.classes)
        opt = self.make_optimizer(model)
        snaps = Snapshots(model, N)
        snaps.take()
        ds = Images(self.root, "train", seed, "affine" if self.data == "digits" else "flips",
                    sleep=self.t_load * scale / self.B)
        loader = DataLoader(ds, batch_size=self.B, shuffle=True, drop_last=True, num_workers=1,
                            persistent_workers=True, generator=torch.Generator().manual_seed(int(seed)))
        it = echosim.echoing(loader, policy, max_echo=self.max_echo, epochs=None, batch_size=self.B,
                             auto=auto if policy == "auto" else None)
        use_signals = signals and signals_supported(it)
        meter = lagged = None
        if use_signals:
            meter = _echo_meter(model, self._probe)
            lagged = None if meter is not None else LaggedLoss(model)
        t_step = self.t_step * scale
        clock = time.perf_counter
        times = np.zeros(N + 1)
        prev, n, paused, t0, t_end = None, 0, 0.0, None, 0.0
        wall0 = clock()
        try:
            for batch in it:
                first = batch is not prev
                if first:
                    if prev is None:
                        t0 = clock()  # the clock starts with the first fresh batch (the worker's start left out)
                    else:
                        times[n] = t_end - t0 - paused
                        if n == N:
                            break
                        p0 = clock()
                        with it.paused():
                            snaps.take()
                        paused += clock() - p0
                    prev, n = batch, n + 1
                s0 = clock()
                extra = {}
                if meter is not None:
                    measure = getattr(meter, "before_step", None) or meter.measure
                    extra = dict(measure(it, batch) or {})
                elif lagged is not None:
                    extra = lagged.measure(it, batch, first)
                model.train()
                opt.zero_grad(set_to_none=True)
                loss = batch_loss(model, batch)
                loss.backward()
                opt.step()
                value = loss.item()
                if use_signals and "probe" not in extra and probe_due(it):
                    with torch.no_grad():
                        extra["probe"] = batch_loss(model, self._probe).item()
                rest = t_step - (clock() - s0)
                if rest > 0:
                    time.sleep(rest)
                t_end = clock()
                it.report(value, **extra)
        finally:
            it.close()
            th = getattr(it, "_thread", None)
            if th is not None:
                th.join(timeout=60)
            _shutdown(loader)
        snaps.take()
        r = records_of(it, N)
        run = Run(case=self.name, policy=policy_label(policy), seed=seed, times=times, checkpoints=None,
                  echo=r["echo"], cap=r["cap"], decisions=r["decisions"] if policy == "auto" else [],
                  loadavg=[load0, harness.load()[0]], load_ms=r["load_ms"], step_ms=r["step_ms"],
                  wall_s=clock() - wall0,
                  signals=("on (EchoMeter)" if meter is not None else "on" if use_signals else "unavailable")
                  if signals else "off")
        run.extra["metric"] = snaps.evaluate(model, *self._val)
        return run


def torch_tasks(cache=None) -> list:
    return [
        TorchTask("torch-digits-momentum", "4. PyTorch CNN on digits PNG, SGD(momentum=0.9)", data="digits",
                  optimizer="momentum", lr=0.02, target=0.15, budget=320, cache=cache),
        TorchTask("torch-shapes-adam", "5. PyTorch CNN on procedural shapes JPEG, Adam", data="shapes",
                  optimizer="adam", lr=4e-3, target=0.6, budget=320, cache=cache),
    ]
