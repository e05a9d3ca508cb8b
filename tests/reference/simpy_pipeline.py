"""A straightforward SimPy model of the data pipeline, the naive twin of the Numba loop.

One process per loader worker, one for the accelerator, explicit Python lists for
the buffer, the held batches and the shuffle buffer. It shares nothing with
`echosim.pipeline.kernel` except the pre-drawn input arrays, and implements the rules
documented in `echosim.pipeline` from scratch:

- a worker starts the next production index when free ("before": only while
  batches in service + batches in the buffer < C);
- "after": a finished batch enters the buffer if a slot is free (ordered delivery:
  the last free slot is kept for the lowest production index not yet entered),
  otherwise the worker holds it; held batches enter first come, first served;
- tie rule: the accelerator decides only after every loader event at the current
  time. SimPy orders events by (time, priority, insertion); loader events use the
  default priorities 0 and 1, and every accelerator decision first waits for a
  zero-delay event of priority 2 ("settle"), which runs after all of them.

Test-only; it is slow (about 10^4-10^5 events per second), which is its point.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

SETTLE_PRIORITY = 2


class _Model:
    def __init__(self, *, workers, prefetch, policy, delivery, blocking, echo, max_echo,
                 switch_overhead, shuffle_buffer, batch_size, load_time, step_time,
                 echo_draws, shuffle_draws, caps=None):
        self.env = simpy.Environment()
        self.W = workers
        self.C = prefetch
        self.policy = "greedy" if policy == "auto" else policy  # auto: greedy under its caps
        self.caps = None if caps is None else [int(c) for c in caps]
        self.ordered = delivery == "ordered"
        self.before = blocking == "before"
        self.max_echo = max_echo
        self.h = switch_overhead
        self.load = [float(x) for x in load_time]
        self.T = len(self.load)
        st = np.atleast_1d(np.asarray(step_time, dtype=float))
        self.step_time = [float(x) for x in st]
        self.step_constant = np.ndim(step_time) == 0
        self.B = batch_size
        self.e = echo
        self.echo_draws = echo_draws
        self.shuffle_draws = shuffle_draws
        self.S = shuffle_buffer

        # loader state
        self.next_seq = 0
        self.in_service = 0
        self.waiting_for_slot = 0  # "before": idle workers with work left
        self.held = []  # "after": [seq, wake event] in the order they finished
        self.buffer = []  # seqs in the buffer, in entry order
        self.entered_set = set()
        self.lowest_not_entered = 0
        self.slot_event = self.env.event()
        self.deliver_event = None
        # records
        T = self.T
        self.enter_time = [math.nan] * T
        self.take_time = [math.nan] * T
        self.ready_time = [math.nan] * T
        self.next_ready = 0
        self.n_taken = 0
        self.n_entered = 0
        self.occ_area = 0.0
        self.blocked_area = 0.0
        self.last = 0.0
        self.step_start = []
        self.step_end = []
        self.step_batch = []
        self.step_examples = []
        self.k = [0] * T
        self.busy = 0.0
        self.switch = 0.0

    # -- bookkeeping -------------------------------------------------------

    def _account(self):
        now = self.env.now
        dt = now - self.last
        if dt > 0:
            if self.before:
                blocked = self.waiting_for_slot if self.next_seq < self.T else 0
            else:
                blocked = len(self.held)
            self.occ_area += len(self.buffer) * dt
            self.blocked_area += blocked * dt
            self.last = now

    def _settle(self):
        ev = self.env.event()
        ev._ok = True
        ev._value = None
        self.env.schedule(ev, priority=SETTLE_PRIORITY)
        return ev

    def _deliverable(self):
        t = self.n_taken
        if t >= self.T:
            return False
        if self.ordered:
            return t in self.entered_set
        return len(self.buffer) > 0

    def _enter(self, seq):
        self._account()
        now = self.env.now
        self.buffer.append(seq)
        if self.ordered:
            self.enter_time[seq] = now
            self.entered_set.add(seq)
            while self.lowest_not_entered in self.entered_set:
                self.lowest_not_entered += 1
            while self.next_ready < self.T and self.next_ready in self.entered_set:
                self.ready_time[self.next_ready] = now
                self.next_ready += 1
        else:
            self.enter_time[self.n_entered] = now
            self.ready_time[self.n_entered] = now
        self.n_entered += 1
        if self.deliver_event is not None and not self.deliver_event.triggered:
            self.deliver_event.succeed()

    def _admit(self):
        """Blocking "after": let held batches in, oldest first, while allowed."""
        progress = True
        while progress:
            progress = False
            for item in self.held:
                seq, wake = item
                if len(self.buffer) >= self.C:
                    break
                if self.ordered and seq != self.lowest_not_entered and len(self.buffer) >= self.C - 1:
                    continue
                self._account()
                self.held.remove(item)
                self._enter(seq)
                wake.succeed()
                progress = True
                break

    # -- processes -----------------------------------------------------------

    def worker(self):
        env = self.env
        while True:
            if self.before:
                while self.next_seq < self.T and self.in_service + len(self.buffer) >= self.C:
                    self._account()
                    self.waiting_for_slot += 1
                    yield self.slot_event
                    self._account()
                    self.waiting_for_slot -= 1
            if self.next_seq >= self.T:
                return
            self._account()
            seq = self.next_seq
            self.next_seq += 1
            self.in_service += 1
            yield env.timeout(self.load[seq])
            self._account()
            self.in_service -= 1
            if self.before:
                self._enter(seq)
            else:
                wake = env.event()
                self.held.append([seq, wake])
                self._admit()
                if not wake.triggered:
                    yield wake

    def _take(self):
        """Take the next fresh batch out of the buffer; return its fresh index."""
        self._account()
        t = self.n_taken
        seq = t if self.ordered else self.buffer[0]
        self.buffer.remove(seq)
        self.take_time[t] = self.env.now
        self.n_taken += 1
        if self.before:
            ev, self.slot_event = self.slot_event, self.env.event()
            ev.succeed()
        else:
            self._admit()
        return t

    def _wait_deliverable(self):
        while not self._deliverable():
            self.deliver_event = self.env.event()
            yield self.deliver_event
            self.deliver_event = None
            yield self._settle()

    def _step(self, batch, examples=None):
        env = self.env
        j = len(self.step_end)
        s = self.step_time[0] if self.step_constant else self.step_time[j]
        start = env.now
        yield env.timeout(s)
        self.busy += s
        self.step_start.append(start)
        self.step_end.append(env.now)
        self.step_batch.append(batch)
        if examples is not None:
            self.step_examples.append(examples)

    def _k_fixed(self, t):
        base = math.floor(self.e)
        frac = self.e - base
        if frac == 0:
            return base
        return base + (1 if self.echo_draws[t] < frac else 0)

    def accelerator(self):
        env = self.env
        cur, k = -1, 0
        while True:
            yield self._settle()
            cont = False
            if cur >= 0:
                if self.policy == "fixed":
                    cont = k < self._k_fixed(cur)
                elif self.policy == "greedy":
                    cap = self.max_echo if self.caps is None else self.caps[cur]
                    cont = k < cap and cur < self.T - 1 and not self._deliverable()
                if not cont and cur == self.T - 1:
                    self.k[cur] = k
                    return
            if cont:
                k += 1
                yield from self._step(cur)
                continue
            if cur >= 0:
                self.k[cur] = k
            yield from self._wait_deliverable()
            cur = self._take()
            k = 1
            if self.h > 0:
                self.switch += self.h
                yield env.timeout(self.h)
            yield from self._step(cur)

    def example_accelerator(self):
        """Example echoing: a pull-based echo stage and shuffle buffer."""
        env = self.env
        B, S = self.B, self.S
        base = math.floor(self.e)
        frac = self.e - base
        stream = []  # echoed examples of pulled batches not yet in the shuffle buffer
        pos = 0
        shuffle = []
        m = 0  # examples emitted so far
        running_max = -1
        while True:
            yield self._settle()
            out = []
            while len(out) < B:
                # fill the shuffle buffer up to S, pulling fresh batches on demand
                while len(shuffle) < S:
                    if pos < len(stream):
                        shuffle.append(stream[pos])
                        pos += 1
                        continue
                    if self.n_taken >= self.T:
                        break  # input exhausted: the buffer drains
                    if not self._deliverable():
                        yield from self._wait_deliverable()
                    t = self._take()
                    stream = stream[pos:]
                    pos = 0
                    for i in range(B):
                        c = base + (1 if frac and self.echo_draws[t * B + i] < frac else 0)
                        stream.extend([t * B + i] * c)
                if not shuffle:
                    return  # fewer than B examples left: the last partial batch is dropped
                u = float(self.shuffle_draws[m])
                i = int(u * len(shuffle))
                i = min(i, len(shuffle) - 1)
                out.append(shuffle[i])
                shuffle[i] = shuffle[-1]
                shuffle.pop()
                m += 1
            running_max = max(running_max, max(out) // B)
            if self.h > 0:
                self.switch += self.h
                yield env.timeout(self.h)
            yield from self._step(running_max, out)


def simulate_simpy(pipeline, load_time, step_time, *, echo_draws=None, shuffle_draws=None,
                   batch_size=None, caps=None):
    """Run the SimPy model of `pipeline` on pre-drawn times; return a dict of arrays.

    Same inputs as `echosim.pipeline.simulate_with_times` (the pipeline's settings
    are read as plain attributes; its service-time objects are ignored); `caps`:
    greedy's cap of each batch instead of max_echo.
    """
    S = pipeline.shuffle_buffer
    if pipeline.policy == "example" and S is None:
        S = batch_size * math.ceil(pipeline.echo)
    model = _Model(
        workers=pipeline.workers, prefetch=pipeline.prefetch, policy=pipeline.policy,
        delivery=pipeline.delivery, blocking=pipeline.blocking, echo=pipeline.echo,
        max_echo=pipeline.max_echo, switch_overhead=pipeline.switch_overhead,
        shuffle_buffer=S, batch_size=batch_size, load_time=load_time, step_time=step_time,
        echo_draws=echo_draws, caps=caps,
        shuffle_draws=np.zeros(len(load_time) * batch_size * (math.ceil(pipeline.echo) + 1))
        if pipeline.policy == "example" and shuffle_draws is None else shuffle_draws,
    )
    env = model.env
    for _ in range(model.W):
        env.process(model.worker())
    acc = env.process(model.example_accelerator() if pipeline.policy == "example" else model.accelerator())
    env.run(until=acc)
    T = model.T
    if pipeline.policy == "example":
        step_batch = np.array(model.step_batch, dtype=np.int64)
        k = np.array([int(np.sum(step_batch == t)) for t in range(T)], dtype=np.int64)
        examples = np.array(model.step_examples, dtype=np.int64).reshape(-1, batch_size)
    else:
        k = np.array(model.k, dtype=np.int64)
        examples = None
    return {
        "ready_time": np.array(model.ready_time),
        "steps_per_batch": k,
        "step_start": np.array(model.step_start),
        "step_end": np.array(model.step_end),
        "step_batch": np.array(model.step_batch, dtype=np.int64),
        "step_examples": examples,
        "enter_time": np.array(model.enter_time),
        "take_time": np.array(model.take_time),
        "busy_time": model.busy,
        "switch_time": model.switch,
        "buffer_area": model.occ_area,
        "blocked_area": model.blocked_area,
        "n_events": T + len(model.step_end),
    }
