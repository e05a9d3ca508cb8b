"""A short pilot in the user's own loop.

`pilot` runs the user's step function on their loader under a few echo policies, in
short interleaved segments (so that machine drift hits every policy alike), through
`echosim.echoing`, and returns the records, which `echosim.plan` takes its timing from
(`echosim.planner.recorded`): on a shared host the loader and the step slow each other
down, differently under each policy.

How short: the timing settles within a few dozen fresh batches per policy, far less
than a training run; 40 fresh batches per policy is the default, in as many rounds as
there are policies (segments of 10 for the four default policies): rotated by one
policy a round, every policy then runs once at every position of a round, so a trend
in the machine's speed or in the training's progress falls alike on each. Its cost is
about its fresh batches (policies x batches) at the loader's pace: a few percent of a
run that needs thousands of fresh batches, more than a whole run of a small job (160
fresh batches were 63-180% of a sync run to target on the PyTorch jobs of
benchmarks/torch_job/RESULTS.md); pass fewer `batches` or policies there.

What an echoed step is worth: a `before_step` hook (e.g.
``echosim.loop.torch.EchoMeter(model, batch_loss).before_step``) adds the loop's signals
to each report, chiefly the paired next-batch progress, from which the planner reads
each K's progress per fresh batch against sync's (`echosim.planner.echo_signals`).
Without it, the planner has only the segments' first-step losses.

Where it is read: without `reset` every segment trains one model on, so after the first
round the model may be past the job's target, where an echoed step is worth little; the
echo readings then come from a stretch that does not matter and are noisy. A `reset`
callable (restore the weights and the optimizer's state saved before the pilot) makes
every segment start from the same weights: every policy's readings are then taken over
the same early, high-loss stretch of training, the one that decides the time to target.
The rounds' default is the same with `reset`: each round then repeats that stretch (on
other batches if the loader shuffles), so the rounds are replicas that average the
readings' noise, and the rotation still spreads the machine's drift over the policies.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping

__all__ = ["pilot"]

PILOT_POLICIES = ("sync", 2, 4, "greedy")


def default_rounds(n_policies: int, batches: int) -> int:
    """Rounds for `n_policies` policies and `batches` fresh batches each: one per policy (every
    policy at every position of a round), fewer where segments would get under 5 fresh batches.

    >>> default_rounds(4, 40), default_rounds(4, 12), default_rounds(1, 40)
    (4, 2, 1)
    """
    return max(1, min(int(n_policies), int(batches) // 5))


def _limited(loader, n: int):
    """The first n batches of `loader`, re-iterated over epochs as needed."""
    got = 0
    while got < n:
        empty = True
        for batch in loader:
            empty = False
            yield batch
            got += 1
            if got >= n:
                return
        if empty:
            return


def pilot(step: Callable, loader: Iterable, *, policies=PILOT_POLICIES, batches: int = 40, rounds: int | None = None,
          max_echo: int = 64, batch_size: int | None = None, auto: dict | None = None, sync=None,
          before_step: Callable | None = None, reset: Callable | None = None) -> list:
    """Run ``step(batch)`` under each echo policy for `batches` fresh batches and return the records.
    The pilot trains the model: its steps are real steps of `step` on your weights (unless `reset`).

    Parameters
    ----------
    step : callable
        One training step on a batch; may return the loss (a float, or anything with
        ``float()``, e.g. a 0-d tensor), which is reported to `echoing`.
    loader : re-iterable
        The loader (a DataLoader, a list): each segment iterates it afresh.
    policies : sequence of "sync", "greedy", "auto" or int K
        The policies to time (default: sync, K = 2, K = 4, greedy).
    batches : int
        Fresh batches per policy in all, exactly (split into `rounds` segments whose
        sizes differ by at most one).
    rounds : int, optional
        Segments per policy, interleaved: round r runs every policy once, in an order
        rotated by r. Each segment has at least 2 fresh batches (``batches >= 2 * rounds``).
        Default: the number of policies (each policy once at every position of a round),
        as long as segments keep at least 5 fresh batches; fewer rounds otherwise.
    max_echo, batch_size, auto : passed to `echoing` (and checked, whichever policies are piloted).
    sync : callable, optional
        Passed to `echoing`: called before each reading of the loop's clock, e.g.
        ``torch.cuda.synchronize``, so that a GPU's step times are the device's (a pilot
        is a timing run: pass it on a GPU).
    before_step : callable, optional
        ``before_step(it, batch) -> dict or None``, called before every step: keyword
        arguments for ``it.report`` (``lagged_loss=``, ``probe=``), e.g.
        ``EchoMeter(model, batch_loss).before_step``. `step` must then return the loss. Its
        time is taken out of the records (``it.paused()``), so that its extra forward passes
        do not make your step look slower to the plan.
    reset : callable, optional
        ``reset()``, called before every segment (before its loader starts, so outside the
        records' time): restore the weights and the optimizer's state saved before the pilot,
        e.g. ``lambda: (model.load_state_dict(w0), opt.load_state_dict(o0))`` with
        ``w0 = copy.deepcopy(model.state_dict())`` (and ``o0`` from ``opt``). Every policy's
        segments then train from the same weights over the same early stretch of training,
        so their echo readings (`before_step`) compare like with like. Call it once more
        after the pilot to train from the saved weights.

    Returns
    -------
    list of Records, one per segment, in the order run (pass them to ``plan(records=...)``).

    Raises
    ------
    ValueError
        A bad argument (before any step runs), or a loader that is empty or, re-iterated,
        gives fewer batches than a segment needs (with the number needed).
    """
    from echosim.loop.echoing import echoing

    if not callable(step):
        raise ValueError(f"step: expected a callable step(batch) -> loss, got {type(step).__name__}")
    if not isinstance(loader, Iterable) or isinstance(loader, Iterable) and iter(loader) is loader:
        raise ValueError("loader: expected a re-iterable loader (a DataLoader, a list): each pilot segment "
                         "iterates it afresh")
    if policies is None or isinstance(policies, (bytes, dict, set, frozenset)) or not (
            isinstance(policies, (str, numbers.Integral)) or isinstance(policies, Iterable)):
        raise ValueError(f"policies: expected a policy or a sequence of policies ('sync', 'greedy', 'auto' or an "
                         f"integer K >= 1), got {policies!r:.60}")
    pols = list(policies) if not isinstance(policies, (str, numbers.Integral)) else [policies]
    if not pols:
        raise ValueError("policies: expected at least one policy")
    if before_step is not None and not callable(before_step):
        raise ValueError(f"before_step: expected a callable before_step(it, batch) -> dict of report's keyword "
                         f"arguments, got {before_step!r:.60}")
    if reset is not None and not callable(reset):
        raise ValueError(f"reset: expected a callable reset() that restores the weights (and the optimizer's "
                         f"state) saved before the pilot, or None, got {reset!r:.60}")
    if rounds is None:
        rounds = default_rounds(len(pols), batches) if isinstance(batches, numbers.Integral) else 1
    for name, v, lo in (("batches", batches, 2), ("rounds", rounds, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    if batches < 2 * rounds:
        raise ValueError(f"rounds: {rounds} segments of at least 2 fresh batches each need batches >= {2 * rounds}, "
                         f"got batches = {batches}")
    try:
        n_loader = len(loader)
    except Exception:  # noqa: BLE001 - a loader without a length (an IterableDataset's loader)
        n_loader = None
    if n_loader == 0:
        raise ValueError(f"loader: it is empty; the pilot needs {batches} fresh batches per policy")
    # `batches` split into `rounds` segments whose sizes differ by at most one
    sizes = [batches // rounds + (1 if r < batches % rounds else 0) for r in range(rounds)]
    # every option is checked whether or not the policy it belongs to is piloted
    echoing([], "auto", max_echo=max_echo, batch_size=batch_size, auto=auto, sync=sync).close()
    for p in pols:  # bad policies fail here, before any step runs
        echoing([], p, max_echo=max_echo, batch_size=batch_size, auto=auto if p == "auto" else None).close()
    out = []
    for r in range(rounds):
        order = pols[r % len(pols):] + pols[: r % len(pols)]
        for p in order:
            if reset is not None:
                reset()  # before the loader starts: not in the segment's time
            it = echoing(_limited(loader, sizes[r]), p, max_echo=max_echo, batch_size=batch_size,
                         auto=auto if p == "auto" else None, sync=sync)
            with it:
                for batch in it:
                    extra = None
                    if before_step is not None:
                        with it.paused():  # the signals' passes are not your step: not in its time
                            extra = before_step(it, batch)
                    if extra is not None and not isinstance(extra, Mapping):
                        raise ValueError(f"before_step: expected a dict of report's keyword arguments or None, "
                                         f"got {type(extra).__name__}")
                    loss = step(batch)
                    if loss is not None:
                        it.report(loss, **(extra or {}))
                    elif extra:
                        raise ValueError("step: returned None, but before_step gave signals to report with the "
                                         "loss; return the loss from step")
            rec = it.records()
            if rec.n_batches < sizes[r]:
                what = "no batch" if rec.n_batches == 0 else f"only {rec.n_batches} fresh batches"
                raise ValueError(f"loader: it gave {what} in a pass, and the pilot needs {sizes[r]} fresh batches "
                                 f"in this segment ({batches} per policy in {rounds} segments)")
            out.append(rec)
    return out
