"""The signals of what an echoed step is worth, for a PyTorch model (the ``torch`` extra).

    meter = EchoMeter(model, batch_loss, probe=val_batch)   # batch_loss(model, batch) -> 0-d tensor
    for batch in (it := echosim.echoing(loader, "auto")):
        extra = meter.before_step(it, batch)                 # extra forward passes, no gradients
        opt.zero_grad()
        loss = batch_loss(model, batch)
        loss.backward()
        extra.update(meter.after_backward(it, batch))        # the noise scale's norms, if asked
        opt.step()
        it.report(loss, **extra)

- ``lagged_loss``: on a fresh batch's first step, its loss at the weights the previous
  fresh batch started from (a snapshot of the parameters taken then) and at the current
  weights: two forward passes in eval mode where the model has dropout or batch norm
  (so that both are measured alike), one otherwise (the training loss is the second).
- ``probe``: the loss on held-out batches at the current weights (eval mode), when
  ``it.probe_due``: the signal to use when batches repeat across epochs.
- ``grad_sq`` (``noise=True``): after the backward pass, |g_B|^2 from the parameters'
  gradients and |g_b|^2 from a backward pass on the first half of the batch (on the first
  step of every ``noise_every``-th fresh batch): the gradient-noise scale.

Costs (measured in benchmarks/bench_auto_signals.py): a parameter copy and one or two
forward passes per fresh batch for the lagged loss; a probe's forward pass every
``window`` fresh batches; half a forward-backward pass every ``noise_every`` batches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["EchoMeter"]


def _modal(model: torch.nn.Module) -> bool:
    """Does the model behave differently in train and eval mode (dropout, batch norm)?"""
    kinds = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase)
    return any(isinstance(m, kinds) for m in model.modules())


def _first_half(batch):
    """The first half of every tensor of a batch (a tensor, a tuple/list or a dict of them)."""
    if isinstance(batch, torch.Tensor):
        return batch[: max(1, batch.shape[0] // 2)]
    if isinstance(batch, (list, tuple)):
        return type(batch)(_first_half(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _first_half(v) for k, v in batch.items()}
    raise ValueError(f"noise: cannot split a batch of type {type(batch).__name__}; pass split=")


class EchoMeter:
    """Measures the optional signals of `echosim.echoing.report` on a PyTorch model.

    Parameters
    ----------
    model : torch.nn.Module
    batch_loss : callable
        ``batch_loss(model, batch)``: the mean loss of `model` on `batch`, a 0-d tensor.
    probe : batch or list of batches, optional
        Held-out data for the probe loss (taken when ``it.probe_due``).
    noise : bool
        Measure the gradient-noise scale's squared norms (default False).
    noise_every : int
        Fresh batches between two such measurements (default 8).
    split : callable, optional
        ``split(batch) -> (sub_batch, b)`` for the noise scale; default: the first half of
        every tensor of the batch.
    """

    def __init__(self, model: torch.nn.Module, batch_loss: Callable, *, probe=None, noise: bool = False,
                 noise_every: int = 8, split: Callable | None = None):
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not callable(batch_loss):
            raise ValueError(f"batch_loss: expected a callable batch_loss(model, batch), got {batch_loss!r:.60}")
        if isinstance(noise_every, bool) or not isinstance(noise_every, int) or noise_every < 1:
            raise ValueError(f"noise_every: expected an integer >= 1, got {noise_every!r}")
        self.model, self.batch_loss = model, batch_loss
        self.probe = None if probe is None else (probe if isinstance(probe, list) else [probe])
        self.noise, self.noise_every, self.split = bool(noise), noise_every, split
        self._params = [p for p in model.parameters() if p.requires_grad]
        self._snapshot = None
        self._modal = _modal(model)
        self._fresh = -1

    @torch.no_grad()
    def _loss_at(self, batch, params=None) -> float:
        """The loss on `batch` at `params` (the current weights if None), in eval mode if modal."""
        saved = None
        if params is not None:
            saved = [p.detach().clone() for p in self._params]
            for p, s in zip(self._params, params):
                p.copy_(s)
        was = self.model.training
        try:
            if self._modal:
                self.model.eval()
            return float(self.batch_loss(self.model, batch))
        finally:
            self.model.train(was)
            if saved is not None:
                for p, s in zip(self._params, saved):
                    p.copy_(s)

    def before_step(self, it, batch) -> dict:
        """Before the optimizer step: the lagged loss on a fresh batch's first step (and a new
        snapshot), the probe when due. Returns keyword arguments for ``it.report``."""
        out: dict = {}
        if it.is_echo:
            return out
        self._fresh += 1
        if self._snapshot is not None:
            before = self._loss_at(batch, self._snapshot)
            out["lagged_loss"] = (before, self._loss_at(batch)) if self._modal else before
        with torch.no_grad():
            self._snapshot = [p.detach().clone() for p in self._params]
        if self.probe is not None and it.probe_due:
            out["probe"] = sum(self._loss_at(b) for b in self.probe) / len(self.probe)
        return out

    def after_backward(self, it, batch) -> dict:
        """After ``loss.backward()`` and before ``opt.step()``: ``grad_sq`` on the first step of
        every ``noise_every``-th fresh batch (if ``noise``), else nothing."""
        if not self.noise or it.is_echo or self._fresh % self.noise_every:
            return {}
        grads = [p.grad for p in self._params]
        if any(g is None for g in grads):
            raise ValueError("noise: a parameter has no gradient; call after loss.backward()")
        sq_full = float(sum((g.detach() * g.detach()).sum() for g in grads))
        sub, b = self.split(batch) if self.split is not None else (_first_half(batch), None)
        if b is None:
            b = next(t for t in (sub if isinstance(sub, (list, tuple)) else [sub]) if isinstance(t, torch.Tensor)).shape[0]
        small = torch.autograd.grad(self.batch_loss(self.model, sub), self._params)
        sq_small = float(sum((g * g).sum() for g in small))
        return {"grad_sq": (int(b), sq_small, sq_full)}
