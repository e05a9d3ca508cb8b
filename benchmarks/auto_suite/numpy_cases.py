"""The NumPy cases: bench_auto.py's least-squares and logistic problems (imported, not
copied) and a one-hidden-layer MLP on scikit-learn's digits table, each a `Task` that
`loop.run_task` drives: plain SGD at one learning rate for every policy."""

from __future__ import annotations

import math

import bench_auto
import numpy as np


class ProblemTask:
    """One of bench_auto.py's cases (its problem, B, lr, target, budget, loader and step times)."""

    kind = "numpy"
    metric = "excess risk"
    smooth = True

    def __init__(self, case: bench_auto.Case):
        self.case = case
        self.name, self.title = case.name, case.title
        self.B, self.lr, self.budget, self.target = case.B, case.lr, case.budget, case.target
        self.t_load, self.t_step, self.max_echo = case.t_load, case.t_step, case.max_echo
        self._problem = None
        self._probes: dict = {}

    @property
    def problem(self):
        if self._problem is None:
            self._problem = self.case.make_problem()
        return self._problem

    def describe(self) -> str:
        return (f"{self.problem.describe()}; plain SGD; B = {self.B}, lr = {self.lr:g}; target excess risk "
                f"{self.target:g}; budget {self.budget} fresh batches; bench_auto.py's regime: {self.case.claim}")

    def batches(self, seed: int, n: int) -> list:
        return bench_auto.draw_batches(self.problem, self.B, seed, n)

    def init(self, seed: int):
        return self.problem.w0.copy()

    def snapshot(self, w):
        return w.copy()

    def step(self, w, batch, echo: bool):
        X, y = batch
        loss, g = self.problem.loss_grad(w, X, y)
        w -= self.lr * g
        return loss, w

    def loss(self, w, batch) -> float:
        return self.problem.loss_grad(w, *batch)[0]

    def probe(self, w, seed: int) -> float:
        """A held-out loss: 4B examples drawn once per seed apart from the training stream."""
        if seed not in self._probes:
            self._probes[seed] = self.problem.batch(np.random.default_rng([seed, 2**31 - 1]), 4 * self.B)
        return self.loss(w, self._probes[seed])

    def evaluate(self, checkpoints) -> np.ndarray:
        return np.asarray(self.problem.excess(np.asarray(checkpoints)), dtype=float)


def bench_auto_tasks() -> list:
    return [ProblemTask(c) for c in bench_auto.CASES.values()]


# ---- a non-convex model on a real table

class DigitsTable:
    """scikit-learn's digits (1,797 rows, 64 pixels in 0..16, shipped with it: no download),
    scaled to 0..1, split once (stratified, random_state 0) into 1,297 training rows, 100
    probe rows (the held-out loss of ``--signals``) and 400 validation rows (the target)."""

    def __init__(self):
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        d = load_digits()
        X, y = d.data / 16.0, d.target.astype(np.int64)
        idx = np.arange(len(y))
        tr, rest = train_test_split(idx, test_size=500, stratify=y, random_state=0)
        pr, va = train_test_split(rest, test_size=400, stratify=y[rest], random_state=0)
        self.X, self.y = X[tr], y[tr]
        self.Xp, self.yp = X[pr], y[pr]
        self.Xv, self.yv = X[va], y[va]


class MLPTask:
    """A one-hidden-layer MLP (64 -> hidden tanh -> 10, softmax cross-entropy) in plain NumPy
    with plain SGD; fresh batch t is B rows drawn with replacement by ``default_rng([seed, t])``
    (about 10 epochs' worth of rows over the budget); the weights start from
    ``default_rng([seed, 1])`` (Glorot-uniform, zero biases). Target: the validation loss,
    smoothed as bench_auto.py smooths (centred geometric mean over 9 checkpoints).

    lr: the best of a K = 1 scan without sleeps (``bench_auto_suite.py --scan --time-scale 0``):
    at target 0.25 over 0.1, 0.2, 0.5, 1, 2 (2 seeds: 0.1 never, 2 diverges, 0.5 and 1 best),
    then at target 0.15 over 0.35, 0.5, 0.7, 1, 1.4 (3 seeds; fresh batches to target
    370/never/397, 283/305/391, 254/304/236, 261/304/275, never/344/290): 0.7. Sync reaches
    the target at about 250 of the 400 fresh batches."""

    kind = "numpy"
    metric = "validation loss"
    smooth = True

    def __init__(self, name="mlp-digits", title="3. MLP on the digits table (NumPy, plain SGD)", *, hidden=32,
                 B=32, lr=0.7, target=0.15, budget=400, t_load=0.016, t_step=0.002, max_echo=64):
        self.name, self.title = name, title
        self.hidden, self.B, self.lr, self.target, self.budget = hidden, B, lr, target, budget
        self.t_load, self.t_step, self.max_echo = t_load, t_step, max_echo
        self._data = None

    @property
    def data(self) -> DigitsTable:
        if self._data is None:
            self._data = DigitsTable()
        return self._data

    def describe(self) -> str:
        return (f"MLP 64-{self.hidden}-10 (tanh), softmax cross-entropy, plain SGD, on sklearn's digits "
                f"(1,297 training rows drawn with replacement, 400 validation rows); B = {self.B}, "
                f"lr = {self.lr:g}; target validation loss {self.target:g}; budget {self.budget} fresh batches")

    def batches(self, seed: int, n: int) -> list:
        d = self.data
        out = []
        for t in range(n):
            idx = np.random.default_rng([seed, t]).integers(0, len(d.y), self.B)
            out.append((d.X[idx], d.y[idx]))
        return out

    def init(self, seed: int):
        rng = np.random.default_rng([seed, 1])
        a1, a2 = math.sqrt(6.0 / (64 + self.hidden)), math.sqrt(6.0 / (self.hidden + 10))
        return [rng.uniform(-a1, a1, (64, self.hidden)), np.zeros(self.hidden),
                rng.uniform(-a2, a2, (self.hidden, 10)), np.zeros(10)]

    def snapshot(self, w):
        return [a.copy() for a in w]

    @staticmethod
    def _forward(w, X):
        H = np.tanh(X @ w[0] + w[1])
        Z = H @ w[2] + w[3]
        Z = Z - Z.max(axis=1, keepdims=True)
        logp = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
        return H, logp

    def _loss(self, w, X, y) -> float:
        _, logp = self._forward(w, X)
        return float(-logp[np.arange(len(y)), y].mean())

    def step(self, w, batch, echo: bool):
        X, y = batch
        n = len(y)
        H, logp = self._forward(w, X)
        loss = float(-logp[np.arange(n), y].mean())
        G = np.exp(logp)
        G[np.arange(n), y] -= 1.0
        G /= n
        gW2, gb2 = H.T @ G, G.sum(axis=0)
        GH = (G @ w[2].T) * (1.0 - H * H)
        gW1, gb1 = X.T @ GH, GH.sum(axis=0)
        for p, g in zip(w, (gW1, gb1, gW2, gb2)):
            p -= self.lr * g
        return loss, w

    def loss(self, w, batch) -> float:
        return self._loss(w, *batch)

    def probe(self, w, seed: int) -> float:
        return self._loss(w, self.data.Xp, self.data.yp)

    def evaluate(self, checkpoints) -> np.ndarray:
        return np.array([self._loss(w, self.data.Xv, self.data.yv) for w in checkpoints])
