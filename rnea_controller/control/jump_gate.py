"""The jump gate of the joint-state stream: is a state a fact of the arm's motion, or an
intruder? ROS-free: plain floats, the node's input (ros/inputs.py) calls it per state.

Issues 26 and 29 (a fast state is a fact, not an intruder). A state passes at once if its
positions are within what the joints' velocity limits allow since the previous
state's arrival (plus JUMP_SLACK) and no velocity is beyond VELOCITY_MARGIN times its limit.
Otherwise it is taken only if its motion is continuous with the stream: the previous state is
fresh, both carry velocities and stamps, their stamps are MIN_STEP to `fresh_for` apart and at
most STAMP_AGREEMENT further apart than their arrivals, and every joint beyond the quick bounds
moved by what its velocities say over the stamps' interval, |Δq - (qd_prev + qd) / 2 · dt| <=
CONTINUITY · |(qd_prev + qd) / 2 · dt| (a real overspeed shows in the positions too; the node
then brakes: control/modes.py). When states of a fast stream were lost or delayed, that
interval can hold more than the mean says (a push and the brake): the first state refused so is
kept as a candidate, and the next is taken if it continues the candidate (its suspect joints
beyond their limits, continuous from it; the others within the quick bounds of it).
A positions-only stream shows its motion by its steps: a state beyond the quick bounds is taken
if every such joint's step velocity since the previous state, u = Δq / dt over the stamps,
continues the one that led to the previous state, |u - u_prev| <= CONTINUITY · max(|u|,
|u_prev|) (`_steady`; a runaway or a push moves on from state to state; a jump or a second
source's pose breaks off, and the driver's next step continues the stream's); after states lost
while the velocity changed (the brake during a stall), the state refused so is the candidate,
and the next is taken if the candidate's mean velocity since the previous state lies between
u_prev and the next one's step from it (margin CONTINUITY of the larger), or if its step from
the candidate continues the step into the candidate, both moving at MOVING x the limit or more,
the way and at most GAP_RATIO x as fast on the mean since the last state taken, every step
across the gap under SPEED_CAP x the limit (the push's peak
lost in the gap: the stream has moved on on its own; a pose jumped to and held does not move, a
pose jumped to by a moving stream is far beyond its speed; the gate reopens for it when stale).
Two states alone show no step: a stream that starts beyond the quick bounds has its second
state refused. A velocity field the positions contradict (a hostile or broken publisher), a
position jump, a second source's pose, a first state beyond twice the limit: refused, counted
in `jumps`. The gate opens again once the previous state is older than `fresh_for` (the node's
state_timeout: it went stale, and the first fresh state after that starts a hold where it is).
A state is checked whole before anything is written (`check`, then `taken`).
"""
from collections.abc import Sequence
import math
import operator

JUMP_SLACK = 2e-3  # [s] of motion at the velocity limit a state may add to its arrival step
VELOCITY_MARGIN = 2.0  # a velocity beyond this times its limit must be shown by the positions
CONTINUITY = 0.25  # relative mismatch allowed between a fast state's motion and its velocities
MIN_STEP = 2e-4  # [s] least stamp interval over which a fast state's motion is checked
STAMP_AGREEMENT = 0.01  # [s] largest difference of the stamps' and the arrivals' intervals
MOVING = 0.05  # positions only: a stream moving on after a gap moves at this x its limit
GAP_RATIO = 6.0  # positions only: ... and at most this x as fast since the last state taken
SPEED_CAP = 6.0  # positions only: a step faster than this x its limit is no arm's motion


class JumpGate:
    """The gate of one stream: `check` a state (ValueError naming the joint if refused), then
    `taken` once it is stored. joint_names: model order; velocity_limits [rad/s] (inf: none).
    `fresh_for` [s]: the previous state is compared while this recent (the node's
    state_timeout); `jumps`, `fast`: states refused, fast states taken."""

    def __init__(self, joint_names: Sequence[str],
                 velocity_limits: Sequence[float] | None = None) -> None:
        n = len(joint_names)
        self.joint_names = list(joint_names)
        self._limits = [math.inf] * n if velocity_limits is None else [
            float(v) for v in velocity_limits]
        self._slowest = min(self._limits, default=math.inf)  # within it: no joint is suspect
        self.fresh_for = math.inf
        self.jumps = 0  # states refused
        self.fast = 0  # states beyond the quick bounds taken: their motion is continuous
        # the last state taken: q (list), qd sent (list or None), stamp [ns], arrival [s]
        self._positions, self._velocity, self._stamp_ns, self._time = None, None, 0, -math.inf
        self._before = None  # (q list, stamp [ns]) of the state taken before the last one
        self._candidate = None  # (q, qd, stamp, arrival) of a fast state refused, or None
        self._origin = None  # (q list, stamp [ns]) of the state received before the candidate

    def taken(self, q: list[float], qd: list[float] | None, now: float, stamp_ns: int) -> None:
        """Record the state just stored (q, qd: lists; qd None without velocities)."""
        self._before = (self._positions, self._stamp_ns) if self._positions else None
        self._positions, self._velocity, self._stamp_ns, self._time = q, qd, stamp_ns, now

    def check(self, q: list[float], qd: list[float] | None, now: float, stamp_ns: int) -> None:
        """ValueError (counted in `jumps`) unless the state passes the gate (module doc):
        at once if no joint is `_suspect` against the previous state; else if the suspects'
        motion is continuous with it (`_continuous`), or, after a state refused that way (a
        fast stream whose states were lost or delayed), with that one (`_candidate`). q, qd:
        lists (plain floats: 2 µs a state, numpy's took 7.5); now: its arrival [s]; stamp_ns:
        its stamp [ns] (0: none). Nothing is written but the counts and the candidate: a state
        that passes is recorded by `taken` once the caller has stored it."""
        valid = self._positions is not None
        previous = (self._positions, self._velocity, self._stamp_ns, self._time)
        suspects = self._suspects(q, qd, now, previous if valid else None)
        if not suspects:
            self._candidate = None
            return
        if qd is None:
            taken = valid and (self._steady(q, suspects, stamp_ns, now, previous)
                                    or self._follows_steps(q, suspects, stamp_ns, now, previous))
        else:
            taken = (valid and self._continuous(q, qd, suspects, stamp_ns, now, previous)
                     or self._follows_candidate(q, qd, suspects, stamp_ns, now))
        if taken:
            self.fast += 1
            self._candidate = None
            return
        origin = self._candidate or previous  # the state received before this one
        self._origin = (origin[0], origin[2]) if origin[0] is not None else None
        self._candidate = (q, qd, stamp_ns, now) if stamp_ns else None
        self.jumps += 1
        self._refuse(q, qd, suspects[0], now - self._time, valid and (
            now - self._time < self.fresh_for))

    def _suspects(self, q, qd, now, reference):
        """Joints beyond the gate's quick bounds: a velocity beyond VELOCITY_MARGIN times its
        limit; or, against a fresh `reference` (q, qd, stamp, arrival), a position further
        than the limit allows since its arrival: |q - q_ref| > qd_max (dt + JUMP_SLACK)."""
        limits, slowest, suspects = self._limits, self._slowest, []
        # each joint is looked at only when one is beyond the slowest joint's bound (a quiet
        # state: 1 µs less of every state)
        if qd is not None and not max(map(abs, qd), default=0.0) <= VELOCITY_MARGIN * slowest:
            suspects = [j for j, (v, v_max) in enumerate(zip(qd, limits))
                        if abs(v) > VELOCITY_MARGIN * v_max]
        if reference is not None and now - reference[3] < self.fresh_for:
            reach = now - reference[3] + JUMP_SLACK
            if not (reach >= 0.0 and max(map(abs, map(operator.sub, q, reference[0])),
                                         default=0.0) <= slowest * reach):
                suspects += [j for j, (a, b, v_max) in enumerate(zip(q, reference[0], limits))
                             if abs(a - b) > v_max * reach and j not in suspects]
        return suspects

    def _continuous(self, q, qd, joints, stamp_ns, now, reference):
        """True if `joints` moved from `reference` (q, qd, stamp [ns], arrival [s]) by what the
        velocities of both say over the stamps' interval dt: |Δq - (qd_ref + qd) / 2 · dt| <=
        CONTINUITY · |(qd_ref + qd) / 2 · dt| (module doc). `reference` must be fresh and the
        stamps usable: both set, dt within [MIN_STEP, fresh_for] and at most STAMP_AGREEMENT
        longer than the arrivals' interval (a state may wait in a queue: its arrival lags its
        stamp, never the other way by more than the transit's jitter)."""
        q_ref, qd_ref, stamp_ref, arrival = reference
        step = (stamp_ns - stamp_ref) * 1e-9
        if qd is None or qd_ref is None or not stamp_ref or not (
                MIN_STEP <= step <= self.fresh_for and now - arrival < self.fresh_for
                and step <= now - arrival + STAMP_AGREEMENT):
            return False
        for j in joints:
            expected = 0.5 * (qd_ref[j] + qd[j]) * step
            if not abs(q[j] - q_ref[j] - expected) <= CONTINUITY * abs(expected):
                return False
        return True

    def _step(self, stamp_from, stamp_to, arrival_from, arrival_to):
        """The stamps' interval [s] from one state to a later one, or None where it cannot
        time a motion: a zero stamp, outside [MIN_STEP, fresh_for], the earlier state no
        longer fresh, or longer than the arrivals' interval by more than STAMP_AGREEMENT."""
        step = (stamp_to - stamp_from) * 1e-9
        if stamp_from and MIN_STEP <= step <= self.fresh_for and (
                arrival_to - arrival_from < self.fresh_for
                and step <= arrival_to - arrival_from + STAMP_AGREEMENT):
            return step
        return None

    def _lead_in(self, reference):
        """Positions only: (q list, interval [s]) of the step that led to `reference` (the
        state taken before it, over their stamps), or None if that step times nothing."""
        before = self._before
        if before is None or not before[1]:
            return None
        step = (reference[2] - before[1]) * 1e-9
        return (before[0], step) if MIN_STEP <= step <= self.fresh_for else None

    def _steady(self, q, joints, stamp_ns, now, reference):
        """Positions only: True if `joints` continue the reference's own motion: the step
        velocity u = (q - q_ref) / dt over the stamps' interval is within CONTINUITY of the one
        that led to the reference, u_ref = (q_ref - q_before) / dt_ref (`_smooth`). A real
        overspeed moves on from state to state; a jump, or a second source's pose, breaks
        off from the stream's motion."""
        q_ref, _, stamp_ref, arrival = reference
        step, lead_in = self._step(stamp_ref, stamp_ns, arrival, now), self._lead_in(reference)
        if step is None or lead_in is None:
            return False
        q_before, step_before = lead_in
        return all(_smooth((q_ref[j] - q_before[j]) / step_before, (q[j] - q_ref[j]) / step)
                   for j in joints)

    def _possible(self, j, *speeds):
        """Positions only, across a gap (`_follows_steps`, `_moves_on`: the stream's own
        step is not there to continue): every step velocity [rad/s] of joint j within
        SPEED_CAP times its limit (a pushed arm was measured at 3.5-3.8x; a second source's
        pose 3 rad away 2 ms after a 0.1-rad one beside a driver at rest is 1450 rad/s, which
        the rules alone took)."""
        return all(abs(u) <= SPEED_CAP * self._limits[j] for u in speeds)

    def _follows_steps(self, q, joints, stamp_ns, now, reference):
        """Positions only, after a state refused (`_candidate`, the stream's states lost or
        delayed while its velocity changed: a push, the brake): True if this state continues
        it and the candidate's mean velocity since the reference, u_gap, lies between the
        velocity that led to the reference and this state's from the candidate (each joint of
        `joints`, with CONTINUITY of the larger as margin; this state's alone when the
        reference's is unknown); or if the candidate and this state continue the step into
        the candidate (`_moves_on`: the push's peak lost in the gap, its speed up and down).
        A pose jumped to and held, or alternating with the stream's, never does."""
        candidate = self._candidate
        if candidate is None or candidate[1] is not None:
            return False
        q_c, _, stamp_c, arrival_c = candidate
        q_ref, _, stamp_ref, arrival = reference
        step, gap = self._step(stamp_c, stamp_ns, arrival_c, now), self._step(
            stamp_ref, stamp_c, arrival, arrival_c)
        if step is None or gap is None:
            return False
        lead_in = self._lead_in(reference)
        for j in joints:
            u, u_gap = (q[j] - q_c[j]) / step, (q_c[j] - q_ref[j]) / gap
            u_ref = u if lead_in is None else (q_ref[j] - lead_in[0][j]) / lead_in[1]
            margin = CONTINUITY * max(abs(u), abs(u_ref))
            if not self._possible(j, u, u_gap):
                return False
            if not min(u, u_ref) - margin <= u_gap <= max(u, u_ref) + margin:
                return self._moves_on(q, candidate, step, joints, (q_ref, stamp_ref, stamp_ns))
        return True

    def _moves_on(self, q, candidate, step, joints, since):
        """Positions only: True if the step from the candidate to this state (`step` [s])
        continues the step into the candidate from the state received before it (`_origin`,
        refused or taken), `_smooth`, every joint of `joints` moving at least MOVING times its
        limit in both, the way it went since the last state taken, and at most GAP_RATIO
        times faster on the mean since then (`since`: that state's q, its stamp and this
        one's [ns]; the gap held the push's peak, not a teleport): the stream has moved on
        from the gap on its own. A pose jumped to and held never does (it does not move);
        nor a second source between the driver's states (its step and the driver's next one
        point opposite ways)."""
        origin, (q_c, _, stamp_c, _), (q_ref, stamp_ref, stamp_ns) = self._origin, candidate, since
        if origin is None or not origin[1]:
            return False
        span = (stamp_ns - stamp_ref) * 1e-9
        lead = (stamp_c - origin[1]) * 1e-9
        if not MIN_STEP <= lead <= self.fresh_for:
            return False
        for j in joints:
            u_in, u = (q_c[j] - origin[0][j]) / lead, (q[j] - q_c[j]) / step
            mean = (q[j] - q_ref[j]) / span
            if min(abs(u_in), abs(u)) < MOVING * self._limits[j] or not _smooth(u_in, u) or (
                    not 0.0 < mean / u <= GAP_RATIO) or not self._possible(j, u_in, u, mean):
                return False
        return True

    def _follows_candidate(self, q, qd, suspects, stamp_ns, now):
        """True if the state continues the last state the gate refused for want of continuity
        with the previous one (`_candidate`): its suspect joints move beyond their limits in
        one of the two and continuously from it, the others within the quick bounds of it.
        A fast stream whose states were lost or delayed is then followed again; a still pose
        or a velocity field the positions contradict never is."""
        candidate = self._candidate
        if candidate is None or candidate[1] is None or now - candidate[3] >= self.fresh_for:
            return False
        limits, qd_candidate = self._limits, candidate[1]
        if not all(max(abs(qd[j]), abs(qd_candidate[j])) > limits[j] for j in suspects):
            return False
        if any(j not in suspects for j in self._suspects(q, qd, now, candidate)):
            return False
        return self._continuous(q, qd, suspects, stamp_ns, now, candidate)

    def _refuse(self, q, qd, j, dt, fresh):
        """ValueError naming joint j: a velocity beyond the margin, or a position jump."""
        name, v_max = self.joint_names[j], self._limits[j]
        moved = abs(q[j] - self._positions[j]) if self._positions is not None else abs(q[j])
        if qd is not None and abs(qd[j]) > VELOCITY_MARGIN * v_max:
            raise ValueError(f'joint {name!r} velocity {qd[j]:.4g} rad/s is beyond '
                             f'{VELOCITY_MARGIN:g} x its limit {v_max:g} rad/s, and its '
                             'positions do not show that motion' + (
                                 f' (moved {moved:.4g} rad in {dt * 1e3:.3g} ms)' if fresh
                                 else ' (no fresh state before it)'))
        raise ValueError(f'joint {name!r} jumps {moved:.4g} rad in {dt * 1e3:.3g} ms, more '
                         f'than its velocity limit {v_max:g} rad/s allows (another source?)')


def _smooth(u_before, u):
    """True if a step velocity u [rad/s] continues u_before: |u - u_before| <= CONTINUITY ·
    max(|u_before|, |u|) (a jump from rest never does: 0 continues only 0)."""
    return abs(u - u_before) <= CONTINUITY * max(abs(u_before), abs(u))
