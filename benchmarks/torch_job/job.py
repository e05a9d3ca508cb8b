"""The real PyTorch job: digits stored as JPEG, decoded and augmented by Pillow in a DataLoader
worker process, a small MLP trained with plain SGD, every step through `echosim.echoing`.

The pieces (`build_cache`, `DigitsJPEG`, `make_loader`, `make_model`, `train`, `profile_block`)
are importable for other benchmarks (issue 19's `policy="auto"` benchmark reuses them).
Needs ``pip install -e .[torch]`` (torch, pillow) and scikit-learn (the digits).
"""

from __future__ import annotations

import gc
import io
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import echosim

try:  # imported as torch_job.job (from benchmarks/) or as job (benchmarks/torch_job/run.py)
    from . import rules
except ImportError:
    import rules

torch.set_num_threads(1)

N_TRAIN, N_VAL = 1438, 359


@dataclass(frozen=True)
class JobConfig:
    """What defines the job (everything written into each record)."""

    image_size: int = 32        # the 8x8 digits upscaled to image_size x image_size, stored as JPEG
    batch_size: int = 128       # B; drop_last: 1438 // 128 = 11 fresh batches per epoch
    hidden: int = 256           # the MLP: image_size**2 -> hidden -> ReLU -> 10
    lr: float = 0.2             # eta, plain SGD, the same for every policy: the best K = 1 lr (lr_scan.py)
    budget: int = 250           # fresh batches per run, the same for every policy
    max_echo: int = 64          # echoing's cap under greedy
    num_workers: int = 1        # DataLoader worker processes
    rotate: float = 12.0        # augmentation: rotation in [-rotate, rotate] degrees,
    scale: float = 0.1          #   scale in [1 - scale, 1 + scale],
    shift: float = 2.0          #   shift in [-shift, shift] pixels on each axis
    jpeg_quality: int = 90


# ---- the data

def default_cache() -> Path:
    """$XDG_CACHE_HOME/echosim/torch_job (or ~/.cache/...)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "echosim" / "torch_job"


def build_cache(cache: Path | str, image_size: int = 32, quality: int = 90) -> Path:
    """Write sklearn's digits once as JPEG files (upscaled bicubically), with a manifest.

    The split is fixed (stratified, 1,438 training / 359 validation images, random_state 0),
    the same for every seed: seeds vary the model's initialisation, the shuffling and the
    augmentation. Returns the directory; a complete one is reused as it is.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    root = Path(cache) / f"digits{image_size}-q{quality}"
    manifest = root / "manifest.json"
    if manifest.exists():
        return root
    digits = load_digits()
    idx = np.arange(len(digits.target))
    tr, va = train_test_split(idx, test_size=N_VAL, stratify=digits.target, random_state=0)
    assert len(tr) == N_TRAIN and len(va) == N_VAL
    (root / "img").mkdir(parents=True, exist_ok=True)
    files = []
    for i in idx:
        a = np.round(digits.images[i] * (255.0 / 16.0)).astype(np.uint8)
        img = Image.fromarray(a, mode="L").resize((image_size, image_size), Image.BICUBIC)
        name = f"img/{i:04d}.jpg"
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=quality)
        (root / name).write_bytes(buf.getvalue())
        files.append(name)
    pix = np.stack([np.asarray(Image.open(root / files[i]), dtype=np.float64) / 255.0 for i in tr])
    info = {"image_size": image_size, "quality": quality, "files": files,
            "labels": digits.target.astype(int).tolist(), "train": tr.tolist(), "val": va.tolist(),
            "mean": float(pix.mean()), "std": float(pix.std())}
    tmp = root / ".manifest.tmp"
    tmp.write_text(json.dumps(info), encoding="utf-8")
    os.replace(tmp, manifest)  # written last: its presence means the cache is complete
    return root


def read_manifest(root: Path | str) -> dict:
    return json.loads((Path(root) / "manifest.json").read_text(encoding="utf-8"))


class DigitsJPEG(Dataset):
    """Opens, decodes and (for training) augments one JPEG per item; returns (image tensor, label).

    The augmentation of the c-th fetch of item i comes from ``default_rng([seed, i, c])``:
    with one worker and a seeded shuffle, every policy at a seed sees the same fresh
    batches (common random numbers), and no global RNG is used.
    """

    def __init__(self, root: Path | str, split: str, seed: int, cfg: JobConfig, augment: bool = True):
        info = read_manifest(root)
        self.root = Path(root)
        self.items = [(info["files"][i], info["labels"][i]) for i in info[split]]
        self.mean, self.std = info["mean"], info["std"]
        self.seed, self.cfg, self.augment = int(seed), cfg, augment
        self.fetches = np.zeros(len(self.items), dtype=np.int64)  # per worker process copy

    def __len__(self):
        return len(self.items)

    def _affine(self, img: Image.Image, rng: np.random.Generator) -> Image.Image:
        c = self.cfg
        theta = math.radians(rng.uniform(-c.rotate, c.rotate))
        s = rng.uniform(1.0 - c.scale, 1.0 + c.scale)
        tx, ty = rng.uniform(-c.shift, c.shift, 2)
        n = img.size[0]
        cx = cy = (n - 1) / 2.0
        # Pillow wants the inverse map, output (x, y) -> input: rotate by -theta, scale 1/s, about the centre
        a, b = math.cos(theta) / s, math.sin(theta) / s
        d, e = -math.sin(theta) / s, math.cos(theta) / s
        x0, y0 = cx + tx, cy + ty
        coeffs = (a, b, cx - a * x0 - b * y0, d, e, cy - d * x0 - e * y0)
        return img.transform(img.size, Image.AFFINE, coeffs, resample=Image.BILINEAR)

    def __getitem__(self, i):
        name, label = self.items[i]
        with Image.open(self.root / name) as f:
            img = f.convert("L")
        if self.augment:
            rng = np.random.default_rng([self.seed, int(i), int(self.fetches[i])])
            self.fetches[i] += 1
            img = self._affine(img, rng)
        a = (np.asarray(img, dtype=np.float32) / 255.0 - self.mean) / self.std
        return torch.from_numpy(a), label


def validation_tensors(root: Path | str, cfg: JobConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The 359 validation images decoded once, without augmentation: (X, y)."""
    ds = DigitsJPEG(root, "val", 0, cfg, augment=False)
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs), torch.tensor(ys)


def make_loader(root: Path | str, seed: int, cfg: JobConfig) -> DataLoader:
    """The training DataLoader: shuffled by a seeded generator, persistent worker(s), full batches only."""
    ds = DigitsJPEG(root, "train", seed, cfg)
    return DataLoader(ds, batch_size=cfg.batch_size, shuffle=True, drop_last=True,
                      num_workers=cfg.num_workers, persistent_workers=cfg.num_workers > 0,
                      generator=torch.Generator().manual_seed(int(seed)))


class Epochs:
    """Re-iterate a loader forever (epoch after epoch); the first pass starts in ``iter()``,
    so a DataLoader's worker processes are forked by the caller's thread."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return self._passes(iter(self.loader))

    def _passes(self, first):
        yield from first
        while True:
            yield from self.loader


def shutdown(loader: DataLoader) -> None:
    """Stop a persistent DataLoader's workers now (rather than whenever it is collected)."""
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None


# ---- the model and its step

def make_model(seed: int, cfg: JobConfig) -> torch.nn.Module:
    torch.manual_seed(int(seed))  # the same initial weights for every policy at a seed
    n = cfg.image_size ** 2
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(n, cfg.hidden), torch.nn.ReLU(),
                               torch.nn.Linear(cfg.hidden, 10))


def make_step(model: torch.nn.Module, cfg: JobConfig):
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)

    def step(batch) -> float:
        x, y = batch
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


@torch.no_grad()
def evaluate(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    out = model(X)
    return F.cross_entropy(out, y).item(), (out.argmax(1) == y).float().mean().item()


class Snapshots:
    """The parameters after each fresh batch, copied into one preallocated buffer; evaluated
    after the run, so the loader never gets a head start while the loop evaluates."""

    def __init__(self, model: torch.nn.Module, n: int):
        self.params = list(model.parameters())
        self.sizes = [p.numel() for p in self.params]
        self.buf = torch.zeros((n + 1, sum(self.sizes)), dtype=torch.float32)  # pages touched now, not in the run
        self.n = 0

    @torch.no_grad()
    def take(self) -> None:
        torch.cat([p.reshape(-1) for p in self.params], out=self.buf[self.n])
        self.n += 1

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, X, y) -> tuple[np.ndarray, np.ndarray]:
        loss, acc = np.empty(self.n), np.empty(self.n)
        for k in range(self.n):
            torch.nn.utils.vector_to_parameters(self.buf[k], self.params)
            loss[k], acc[k] = evaluate(model, X, y)
        return loss, acc


class TrainingClock:
    """The training clock of a loop through `echosim.echoing`, fresh batch by fresh batch.

    Iterating yields the loop's batches until `n` fresh batches are done. The clock starts
    when the loop holds the first fresh batch (starting the worker is not counted). When
    fresh batch k is done (the loop is handed batch k + 1), ``times[k]`` is the end of its
    last step (`stepped`) less the pauses and ``steps_cum[k]`` the steps so far; the
    parameters are then copied (``snaps.take()``) inside ``it.paused()``, out of this clock
    and of echoing's records. ``fresh`` is the number of fresh batches begun, ``done``
    whether all `n` finished.
    """

    def __init__(self, it, snaps: Snapshots, n: int, clock=time.perf_counter):
        self.it, self.snaps, self.n, self.clock = it, snaps, n, clock
        self.times = np.zeros(n + 1)
        self.steps_cum = np.zeros(n + 1, dtype=np.int64)
        self.fresh = self.steps = 0
        self.paused = self.t_end = 0.0
        self.t0 = None
        self.done = False

    def __iter__(self):
        prev = None
        for batch in self.it:
            if batch is not prev:
                if prev is None:
                    self.t0 = self.clock()
                else:  # fresh batch `fresh` is finished: its last step ended at t_end
                    self.times[self.fresh] = self.t_end - self.t0 - self.paused
                    self.steps_cum[self.fresh] = self.steps
                    if self.fresh == self.n:
                        self.done = True
                        return
                    p0 = self.clock()
                    with self.it.paused():
                        self.snaps.take()
                    self.paused += self.clock() - p0
                prev = batch
                self.fresh += 1
            yield batch

    def stepped(self) -> float:
        """Mark the end of a step; returns its time on the clock."""
        self.t_end = self.clock()
        self.steps += 1
        return self.t_end


# ---- one run

def versions() -> dict:
    """The environment (`harness.environment`: machine, CPU, cores, versions, load) and Pillow's version."""
    import PIL

    return {**rules.harness.environment(), "pillow": PIL.__version__}


def _close(it) -> None:
    it.close()
    thread = getattr(it, "_thread", None)  # close() does not wait for the background thread
    if thread is not None:
        thread.join(timeout=60)


def first_batches(records, n: int):
    """`Records` of the first `n` fresh batches only: the loop learns that batch n is finished
    when echoing hands it batch n + 1, which it does not step on (echoing counts one step)."""
    from dataclasses import replace

    keep = records.step_batch < n
    from echosim.loop.records import SIGNAL_FIELDS

    per_batch = {k: getattr(records, k)[:n] for k in ("load_time", "load_censored", "wait_time", "steps_per_batch",
                                                       "cap", "epoch", "small_batch", *SIGNAL_FIELDS)}
    per_step = {k: getattr(records, k)[keep] for k in ("step_batch", "step_start", "step_time", "loss")}
    return replace(records, **per_batch, **per_step)


def train(policy, seed: int, cfg: JobConfig, root: Path | str, val: tuple, *, block: int = 0,
          position: int = 0):
    """Train one (policy, seed) for ``cfg.budget`` fresh batches through `echosim.echoing`.

    The training clock starts when the loop holds the first fresh batch (starting the
    worker is not counted). After each fresh batch the parameters are copied inside
    ``it.paused()`` (taken out of this clock and of echoing's records); the copies are
    evaluated on the validation set after the run, so the loader gets no head start
    while the loop evaluates. Every step's loss goes to ``it.report``.
    Returns (record, arrays, records): the first two in the format of `rules.save_run`,
    the last echoing's own `Records` (``records.save(path)``; `echosim.plan` reads it).
    """
    load_start = rules.harness.load()
    model = make_model(seed, cfg)
    step = make_step(model, cfg)
    snaps = Snapshots(model, cfg.budget)
    snaps.take()
    loader = make_loader(root, seed, cfg)
    it = echosim.echoing(loader, policy, max_echo=cfg.max_echo, epochs=None, batch_size=cfg.batch_size)
    clock = time.perf_counter
    N = cfg.budget
    echo = np.zeros(N, dtype=np.int64)
    step_time, step_loss, step_fresh = [], [], []
    wall0 = clock()
    tc = TrainingClock(it, snaps, N, clock)
    try:
        for batch in tc:
            s0 = clock()
            loss = step(batch)
            t_end = tc.stepped()
            it.report(loss)
            step_time.append(t_end - s0)
            step_loss.append(loss)
            step_fresh.append(tc.fresh)
            echo[tc.fresh - 1] += 1
        if not tc.done:
            raise RuntimeError("the loader ended before the budget")  # epochs=None never ends
        # the last snapshot, after the loop has moved on (the batch it took is not stepped on)
        snaps.take()
        records = first_batches(it.records(), N)
        summary = records.summary()
        auto = it.summary().get("auto")  # policy "auto": the cap in force and its decisions' counts
        if auto is not None:
            summary["auto"] = auto
    finally:
        _close(it)
        shutdown(loader)
    elapsed = clock() - wall0
    load_end = rules.harness.load()
    val_loss, val_acc = snaps.evaluate(model, *val)
    del snaps
    gc.collect()
    arrays = {"val_loss": val_loss, "val_acc": val_acc, "train_time": tc.times, "steps_cum": tc.steps_cum,
              "echo": echo, "step_time": np.asarray(step_time), "step_loss": np.asarray(step_loss),
              "step_fresh": np.asarray(step_fresh, dtype=np.int64),
              "load_time": np.asarray(records.load_time, dtype=float),
              "wait_time": np.asarray(records.wait_time, dtype=float),
              "load_censored": np.asarray(records.load_censored, dtype=bool),
              "cap": np.asarray(records.cap, dtype=np.int64)}
    record = {"format": rules.FORMAT, "name": rules.run_name(policy, seed), "policy": policy,
              "label": rules.policy_label(policy), "seed": int(seed), "block": int(block),
              "position": int(position), "config": asdict(cfg), "versions": versions(),
              "loadavg_start": list(load_start), "loadavg_end": list(load_end), "fresh_batches": N,
              "steps": int(tc.steps), "snapshot_seconds": tc.paused, "elapsed_seconds": elapsed,
              "echoing_summary": summary}
    return record, arrays, records


# ---- profiles taken apart, as the how-to says

def profile_block(seed: int, cfg: JobConfig, root: Path | str, *, loader_batches: int = 40,
                  steps: int = 40) -> dict:
    """The loader alone (`echosim.profile`, warm-up 2) and the step alone (after 5 warm-up
    steps, on one fixed batch): per-batch and per-step seconds."""
    loader = make_loader(root, seed, cfg)
    try:
        trace = echosim.profile(Epochs(loader), loader_batches, warmup=2)
        batch = next(iter(loader))
    finally:
        shutdown(loader)
    model = make_model(seed, cfg)
    step = make_step(model, cfg)
    for _ in range(5):
        step(batch)
    times = np.empty(steps)
    for k in range(steps):
        s0 = time.perf_counter()
        step(batch)
        times[k] = time.perf_counter() - s0
    lt = np.asarray(trace.times, dtype=float)
    return {"seed": int(seed), "loader_times": lt, "step_times": times,
            "loader_mean": float(lt.mean()), "step_mean": float(times.mean())}
