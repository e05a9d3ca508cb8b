"""Numba event loop of the data-pipeline simulator (private; use `echosim.pipeline`;
`kernel_cached` tells the executors whether its compiled code is on disk).

Arrays in, arrays out. Every random time is drawn in NumPy beforehand and passed in:
``load_time[i]`` is the time of the i-th batch a loader worker *starts* (its
production index, "seq"), ``step_time`` holds the accelerator's step times in step
order. The loop is resumable: all of its state lives in the small arrays ``si``
(int64) and ``sf`` (float64) plus the per-worker and per-batch arrays, so when it
runs out of step times or output space it returns a status code, the caller draws,
grows or empties the output, and calls again with the same state. Re-entry is
idempotent because the loop only stops at an accelerator decision point before
changing anything.

The model (documented for users in `echosim.pipeline`):

- W workers form a pool: whenever a worker is free (and, under blocking "before",
  holds a reserved buffer slot) it starts the next production index. Worker
  identity never matters, so the loop keeps only the set of batches in service.
- The buffer holds finished batches not yet taken by the accelerator, at most C.
  "before": a batch reserves its slot when it starts (in service + in buffer <= C).
  "after": a finished batch enters only if a slot is free (with ordered delivery
  the last free slot is kept for the next batch in production order); otherwise
  its worker holds it (blocked).
- Tie rule: at equal times, loader completions are processed first (among
  themselves by production index), then the accelerator decides; slots the
  accelerator frees at time t are reused at time t.
"""

import numpy as np
from numba import njit

from echosim.pipeline.model import POLICIES

# policy codes: from the one table of policies (echosim.pipeline.model.POLICIES)
SYNC = POLICIES["sync"].code
FIXED = POLICIES["fixed"].code
GREEDY = POLICIES["greedy"].code
EXAMPLE = POLICIES["example"].code
AUTO = POLICIES["auto"].code  # greedy under per-batch caps decided as the run goes

# status codes returned by run_des
DONE = 0
NEED_STEP_TIMES = 1
NEED_OUTPUT = 2
DEADLOCK = 3
NEED_CAPS = 4  # the accelerator is about to take a batch whose cap is not known yet

# int parameters pi[...]
P_W = 0  # workers
P_C = 1  # buffer capacity
P_POLICY = 2
P_ORDERED = 3  # 1: ordered delivery
P_BEFORE = 4  # 1: blocking before service
P_MAX_ECHO = 5
P_T = 6  # fresh batches
P_B = 7  # batch size (example echoing)
P_S = 8  # shuffle buffer (example echoing)
P_N_STEPS = 9  # total steps, when known in advance (example echoing)
P_TOTAL_EX = 10  # total echoed examples (example echoing)
P_CYCLIC = 11  # 1: step j uses step_time[j % len]; 0: step_time[j - offset]
P_N_CAPS = 12  # greedy/auto: -1, every cap is max_echo; else per_batch[t] caps batch t < P_N_CAPS
N_PI = 13

# float parameters pf[...]
PF_SWITCH = 0  # switch overhead h
N_PF = 1

# int state si[...]
S_NEXT_SEQ = 0  # batches started by the loader
S_N_SERV = 1  # batches in service
S_N_HELD = 2  # finished batches held by blocked workers ("after")
S_OCC = 3  # buffer occupancy
S_N_ENTERED = 4  # batches that entered the buffer
S_N_TAKEN = 5  # batches taken by the accelerator (= delivered index of the next one)
S_CUR = 6  # batch in use by the accelerator (-1: none yet)
S_K_CUR = 7  # steps taken on it so far
S_J = 8  # steps taken in total
S_DONE = 9
S_AVAIL = 10  # echoed examples pulled into the shuffle stage (example echoing)
S_N_EVENTS = 11  # loader completions + steps
S_STEP_OFFSET = 12  # global index of step_time[0] (non-cyclic step times)
S_HEAD = 13  # lowest production index not yet in the buffer (ordered delivery)
S_PHASE = 14  # accelerator: 0 = decide the next step, 1 = needs fresh data
S_WAITING = 15  # 1: the accelerator idles until the next loader completion
S_OUT_OFFSET = 16  # global index of the step in step_start[0] (the caller empties the output)
N_SI = 17

# float state sf[...]
F_NOW = 0  # the accelerator's next decision time
F_LAST = 1  # time up to which the areas below are integrated
F_OCC_AREA = 2  # integral of buffer occupancy dt
F_BLOCKED_AREA = 3  # integral of the number of blocked workers dt
F_BUSY = 4  # total step time
F_SWITCH = 5  # total switch overhead
N_SF = 6


@njit(cache=True)
def init_des(pi, si, sf, serv_fin, serv_seq, load_time):
    """Initial state: empty buffer; the workers that may start do so at time 0."""
    si[:] = 0
    sf[:] = 0.0
    si[S_CUR] = -1
    W = pi[P_W]
    T = pi[P_T]
    n = 0
    limit = W if pi[P_BEFORE] == 0 else min(W, pi[P_C])
    while n < limit and n < T:
        serv_fin[n] = load_time[n]
        serv_seq[n] = n
        n += 1
    si[S_N_SERV] = n
    si[S_NEXT_SEQ] = n


@njit(cache=True)
def _blocked_workers(before, W, n_serv, next_seq, T, n_held):
    """Workers blocked now: idle for want of a slot ("before") or holding a batch ("after")."""
    if before:
        return W - n_serv if next_seq < T else 0
    return n_held


@njit(cache=True)
def run_des(
    pi, pf, load_time, per_batch, step_time, si, sf, serv_fin, serv_seq, held_seq,
    entered, enter_time, take_time, steps_per_batch, step_start, step_end, step_batch,
):
    """Run the event loop until done, or until it needs more step times or output.

    One flat loop over events, the state in local variables (fast), written back
    to ``si``/``sf`` on return. Each pass handles one event: a loader completion
    (every completion at time <= the accelerator's decision time comes first: the
    tie rule), or an accelerator action (decide, take a fresh batch, start a step).
    After a completion or a take, held batches enter the buffer and free workers
    start ("react").

    Parameters
    ----------
    pi, pf : int64[N_PI], float64[N_PF]
        Parameters (see the ``P_*``/``PF_*`` indices).
    load_time : float64[T]
        Loader time of production index i.
    per_batch : int64[T] (or [1], unused)
        K_t for policy "fixed"; echoed copies of fresh batch t for "example"; the cap
        of batch t under "greedy"/"auto" when ``pi[P_N_CAPS] >= 0`` (the loop returns
        NEED_CAPS before taking batch ``pi[P_N_CAPS]``, so the caller can decide more).
    step_time : float64[n]
        Step times: step j uses ``step_time[j % n]`` if ``pi[P_CYCLIC]``, else
        ``step_time[j - si[S_STEP_OFFSET]]``.
    si, sf : int64[N_SI], float64[N_SF]
        Scalar state (see `init_des`).
    serv_fin, serv_seq : float64[W], int64[W]
        Completion time and production index of the batches in service.
    held_seq : int64[W]
        Finished batches waiting to enter the buffer, in the order they finished.
    entered : uint8[T]
        Ordered delivery: has production index i entered the buffer?
    enter_time, take_time, steps_per_batch : per fresh batch outputs
    step_start, step_end, step_batch : per step outputs: step j goes to index
        ``j - si[S_OUT_OFFSET]`` (capacity = their length; step_batch is -1 for
        "example", filled by the caller)

    Returns
    -------
    int
        DONE, NEED_STEP_TIMES, NEED_OUTPUT, NEED_CAPS or DEADLOCK.
    """
    W = pi[P_W]
    C = pi[P_C]
    policy = pi[P_POLICY]
    ordered = pi[P_ORDERED] == 1
    before = pi[P_BEFORE] == 1
    max_echo = pi[P_MAX_ECHO]
    T = pi[P_T]
    B = pi[P_B]
    S = pi[P_S]
    n_steps_ex = pi[P_N_STEPS]
    total_ex = pi[P_TOTAL_EX]
    cyclic = pi[P_CYCLIC] == 1
    n_caps = pi[P_N_CAPS]
    capped = n_caps >= 0
    if policy == AUTO:
        policy = GREEDY
    h = pf[PF_SWITCH]
    cap = step_end.shape[0]
    n_st = step_time.shape[0]

    next_seq = si[S_NEXT_SEQ]
    n_serv = si[S_N_SERV]
    n_held = si[S_N_HELD]
    occ = si[S_OCC]
    n_entered = si[S_N_ENTERED]
    n_taken = si[S_N_TAKEN]
    cur = si[S_CUR]
    k_cur = si[S_K_CUR]
    j = si[S_J]
    avail = si[S_AVAIL]
    n_events = si[S_N_EVENTS]
    step_off = si[S_STEP_OFFSET]
    out_off = si[S_OUT_OFFSET]
    head = si[S_HEAD]
    phase = si[S_PHASE]
    waiting = si[S_WAITING] == 1
    now = sf[F_NOW]
    last = sf[F_LAST]
    occ_area = sf[F_OCC_AREA]
    blocked_area = sf[F_BLOCKED_AREA]
    busy = sf[F_BUSY]
    switch = sf[F_SWITCH]

    status = DONE
    kmin = -1  # service slot of the next completion (-1: recompute)
    js = j % n_st if cyclic else j - step_off  # index of step j's time in step_time
    while True:
        if si[S_DONE] == 1:
            status = DONE
            break
        if kmin < 0 and n_serv > 0:
            kmin = 0
            for q in range(1, n_serv):
                if serv_fin[q] < serv_fin[kmin] or (
                    serv_fin[q] == serv_fin[kmin] and serv_seq[q] < serv_seq[kmin]
                ):
                    kmin = q
        t_react = -1.0
        do_step = False
        if n_serv > 0 and (waiting or serv_fin[kmin] <= now):
            # ---- a loader completion (time order, ties by production index)
            t = serv_fin[kmin]
            seq = serv_seq[kmin]
            if t > now:  # the accelerator was waiting: its clock moves on
                now = t
            waiting = False
            if t > last:
                blocked = _blocked_workers(before, W, n_serv, next_seq, T, n_held)
                occ_area += occ * (t - last)
                blocked_area += blocked * (t - last)
                last = t
            n_serv -= 1
            serv_fin[kmin] = serv_fin[n_serv]
            serv_seq[kmin] = serv_seq[n_serv]
            kmin = -1
            n_events += 1
            held_seq[n_held] = seq  # "before": enters at once (its slot is reserved)
            n_held += 1
            t_react = t
        elif waiting:
            status = DEADLOCK  # cannot happen for a valid model
            break
        elif phase == 0:
            # ---- the accelerator decides, at time now
            cont = False
            if policy == EXAMPLE:
                if j >= n_steps_ex:
                    si[S_DONE] = 1
                    status = DONE
                    break
            elif cur >= 0:
                if policy == FIXED:
                    cont = k_cur < per_batch[cur]
                elif policy == GREEDY:
                    if k_cur < (per_batch[cur] if capped else max_echo) and cur < T - 1:
                        if ordered:
                            cont = entered[n_taken] == 0
                        else:
                            cont = n_entered <= n_taken
                if not cont and cur == T - 1:
                    steps_per_batch[cur] = k_cur
                    si[S_DONE] = 1
                    status = DONE
                    break
            # a step follows: make sure there is a step time and room for it
            if j - out_off >= cap:
                status = NEED_OUTPUT
                break
            if not cyclic and js >= n_st:
                status = NEED_STEP_TIMES
                break
            if cont:
                k_cur += 1
                do_step = True
                start = now
                sb = cur
            else:
                if cur >= 0 and policy != EXAMPLE:
                    steps_per_batch[cur] = k_cur
                phase = 1
        else:
            # ---- the accelerator wants fresh data (phase 1)
            deliverable = n_taken < T and (entered[n_taken] == 1 if ordered else n_entered > n_taken)
            ready = False
            if policy == EXAMPLE:
                # the shuffle stage must be able to emit this step's B examples:
                # S + (j+1)B - 1 echoed examples pulled, or all of them
                need = S + (j + 1) * B - 1
                if need > total_ex:
                    need = total_ex
                ready = avail >= need
            if ready:
                do_step = True
                start = now + h
                switch += h
                sb = -1
                phase = 0
            elif deliverable and capped and n_taken >= n_caps:
                status = NEED_CAPS  # nothing changed in this pass: re-entry resumes here
                break
            elif deliverable:
                if now > last:
                    blocked = _blocked_workers(before, W, n_serv, next_seq, T, n_held)
                    occ_area += occ * (now - last)
                    blocked_area += blocked * (now - last)
                    last = now
                t = n_taken
                take_time[t] = now
                n_taken += 1
                occ -= 1
                t_react = now
                if policy == EXAMPLE:
                    avail += per_batch[t]
                else:
                    cur = t
                    k_cur = 1
                    do_step = True
                    start = now + h
                    switch += h
                    sb = t
                    phase = 0
            else:
                waiting = True
        if t_react >= 0.0:
            # ---- react: held batches enter while allowed, free workers start
            i = 0
            while i < n_held and occ < C:
                seq = held_seq[i]
                if ordered and not before and seq != head and occ >= C - 1:
                    i += 1  # the last free slot is kept for the next batch in order
                    continue
                for q in range(i, n_held - 1):
                    held_seq[q] = held_seq[q + 1]
                n_held -= 1
                occ += 1
                if ordered:
                    enter_time[seq] = t_react
                    entered[seq] = 1
                    while head < T and entered[head] == 1:
                        head += 1
                else:
                    enter_time[n_entered] = t_react
                n_entered += 1
                i = 0  # the head may have moved: rescan from the oldest
            while next_seq < T and n_serv + n_held < W:
                if before and n_serv + occ >= C:
                    break
                serv_fin[n_serv] = t_react + load_time[next_seq]
                serv_seq[n_serv] = next_seq
                n_serv += 1
                next_seq += 1
                kmin = -1
        if do_step:
            s = step_time[js]
            js += 1
            if cyclic and js == n_st:
                js = 0
            end = start + s
            step_start[j - out_off] = start
            step_end[j - out_off] = end
            step_batch[j - out_off] = sb
            busy += s
            now = end
            j += 1
            n_events += 1

    si[S_NEXT_SEQ] = next_seq
    si[S_N_SERV] = n_serv
    si[S_N_HELD] = n_held
    si[S_OCC] = occ
    si[S_N_ENTERED] = n_entered
    si[S_N_TAKEN] = n_taken
    si[S_CUR] = cur
    si[S_K_CUR] = k_cur
    si[S_J] = j
    si[S_AVAIL] = avail
    si[S_N_EVENTS] = n_events
    si[S_HEAD] = head
    si[S_PHASE] = phase
    si[S_WAITING] = 1 if waiting else 0
    sf[F_NOW] = now
    sf[F_LAST] = last
    sf[F_OCC_AREA] = occ_area
    sf[F_BLOCKED_AREA] = blocked_area
    sf[F_BUSY] = busy
    sf[F_SWITCH] = switch
    return status


@njit(cache=True)
def shuffle_stream(T, B, base_copies, extra, S, u, state, buf, out):
    """Example echoing: emit ``len(out)`` example ids through a shuffle buffer.

    The input stream lists, for fresh batch t = 0..T-1 and example j = 0..B-1, the
    id ``t*B + j`` repeated ``base_copies + extra[t*B + j]`` times (``extra`` empty:
    no extra copies). Before each emission the buffer is filled up to S from the
    input (fewer once the input is exhausted); the emission is ``buf[i]`` with
    ``i = floor(u[m] * len)``, whose place is taken by the last element.
    Resumable: ``state`` = [t, j, copies emitted of (t, j), buffer length].
    """
    t = state[0]
    j = state[1]
    r = state[2]
    n = state[3]
    has_extra = extra.shape[0] > 0
    for m in range(out.shape[0]):
        while n < S and t < T:
            # next input element
            c = base_copies
            if has_extra:
                c += extra[t * B + j]
            while r >= c:
                r = 0
                j += 1
                if j == B:
                    j = 0
                    t += 1
                if t >= T:
                    break
                c = base_copies
                if has_extra:
                    c += extra[t * B + j]
            if t >= T:
                break
            buf[n] = t * B + j
            n += 1
            r += 1
        if n == 0:
            state[0] = t
            state[1] = j
            state[2] = r
            state[3] = n
            return m
        i = np.int64(u[m] * n)
        if i >= n:
            i = n - 1
        out[m] = buf[i]
        buf[i] = buf[n - 1]
        n -= 1
    state[0] = t
    state[1] = j
    state[2] = r
    state[3] = n
    return out.shape[0]


@njit(cache=True)
def batch_steps(take_time, h, steps_per_batch, durations, state, last_end, start, end, batch):
    """Batch policies: the next ``len(durations)`` steps' start, end and batch from per-batch data.

    The K_t steps of fresh batch t run back to back from ``take_time[t] + h`` (in
    `run_des` a step starts when the previous one ends, and a batch's first step h
    after its take), so the same additions in the same order give bitwise the steps
    `run_des` wrote. Resumable: ``state`` = [t, steps done on t], ``last_end`` = [end
    of the previous step].
    """
    t = state[0]
    k = state[1]
    e = last_end[0]
    for i in range(durations.shape[0]):
        s = take_time[t] + h if k == 0 else e
        e = s + durations[i]
        start[i] = s
        end[i] = e
        batch[i] = t
        k += 1
        if k == steps_per_batch[t]:
            t += 1
            k = 0
    state[0] = t
    state[1] = k
    last_end[0] = e


def kernel_cached() -> bool:
    """Whether Numba's on-disk cache holds the event loop (`run_des`) compiled from the
    current source. A guess, used only to skip forking a helper that would merely load it
    and to say when compiling starts: it reads Numba's private cache index, and any
    surprise there counts as not cached."""
    try:
        return bool(run_des._cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - another Numba version: count it as not cached
        return False
