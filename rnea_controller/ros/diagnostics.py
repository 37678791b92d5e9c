"""The controller's 1 Hz status on /diagnostics (diagnostic_msgs/DiagnosticArray).

Published by the tick once a second right after its command, in the slack of that period.
Keys: mode, control law, loop rate [Hz], period jitter p99 [us], tick compute p50/p99 [us]
(tick start to reference published), overruns (ticks longer than a period), missed ticks,
ticks, state age [ms], joint states received, joint state jumps (refused by the jump gate:
ros/inputs.py), fast states taken (beyond the gate's quick bounds, but their motion shown by
their positions), overspeeds (joints found beyond their velocity limit: braking, issue 29)
and the last one, contacts (a joint's external torque beyond its threshold: holding: contact)
and the last one, external torque [N·m] (the observer's estimate now, per joint), its peak
(since the observer last restarted: control/contact.py) and the contact thresholds [N·m] (at
rest), publish failures (middleware refused a write),
rejected messages (and per input: joint_states,
joint_trajectory, external_wrench, robot_description, parameters), non-finite fallbacks,
saturation <joint> (ticks that joint's command was limited), diagnostics publish [us] (the
previous one's cost); timing (docs/timing.md): latency [ms] (running mean of L, the delay from a
state's stamp to its command's effect), latency compensation, phase lock offset [ms] (ticks
after the states' arrival), velocity source (measured or estimated), unstamped states, stamp
offset [ms] and stamps (used, or re-based by the offset: StampClock); joint_states publishers
(issue 26: 'one', or their count and names); adaptation (issue 35: on or paused, with the
actuation delay measured from the arm's motion: control/timing.py's ActuationDelay; WARN while
paused).
"""
import math
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

STATUS_NAME = 'rnea_controller: control loop'


def status_values(node):
    """{key: value} of the status, from the node's config, loop statistics and counters."""
    cfg, controller, loop = node.config, node.controller, node.loop
    rate, jitter, p50, p99 = node.stats.summary(cfg.period)
    state = node.state
    age = (time.perf_counter() - state.time) * 1e3 if state.valid else math.inf
    return {
        'mode': node.mode, 'control law': cfg.law, 'loop rate [Hz]': f'{rate:.1f}',
        'period jitter p99 [us]': f'{jitter:.1f}', 'tick compute p50 [us]': f'{p50:.1f}',
        'tick compute p99 [us]': f'{p99:.1f}',
        'overruns': node.stats.overruns, 'missed ticks': node.stats.missed,
        'ticks': node.stats.count, 'state age [ms]': f'{age:.1f}',
        'joint states received': node.states_received,
        'joint state jumps': state.jumps,
        'fast states taken': state.fast,
        'overspeeds': loop.modes.overspeeds if loop else 0,
        'last overspeed': (loop.modes.fault if loop else None) or 'none',
        'contacts': loop.modes.contacts if loop else 0,
        'last contact': (loop.modes.contact if loop else None) or 'none',
        **(contact_values(loop.observer) if loop else {}),
        'publish failures': node.outputs.failures,
        'rejected messages': sum(node.rejected.values()),
        **{f'rejected {kind}': count for kind, count in node.rejected.items()},
        'non-finite fallbacks': controller.fallbacks,
        **{f'saturation {j}': int(c) for j, c in zip(cfg.joints, controller.saturation,
                                                     strict=True)},
        **{f'step bound {j}': (f'{int(c)} ticks held at {b:.3g} N·m' if c else 'not acting')
           for j, c, b in zip(cfg.joints, controller.stepped, controller.step_bounds,
                              strict=True)},
        'diagnostics publish [us]': f'{(loop.diagnostics_time if loop else 0.0) * 1e6:.0f}',
        **(timing_values(loop.timing) if loop else {}),
        'adaptation': loop.adaptation if loop else 'not active',
    }


def contact_values(observer):
    """The contact observer's figures, per controlled joint (control/contact.py)."""
    return {key: ' '.join(f'{v:.3g}' for v in values) for key, values in (
        ('external torque [N·m]', observer.residual),
        ('external torque peak [N·m]', observer.peak),
        ('contact thresholds [N·m]', observer.thresholds))}


def timing_values(timing):
    """Issue 12's figures: latency L (running mean), phase lock offset, velocity source."""
    lock = timing.phase_lock
    return {
        'latency [ms]': f'{timing.estimator.mean * 1e3:.3f}',
        'latency compensation': str(timing.latency),
        'phase lock offset [ms]': 'off' if lock is None else f'{lock.offset * 1e3:.3f}',
        'velocity source': {None: 'no state yet', True: 'estimated', False: 'measured'}[
            timing.estimating],
        'unstamped states': timing.unstamped,
        'stamp offset [ms]': f'{timing.clock.offset * 1e3:.3f}',
        'stamps': 'used' if timing.clock.usable else 'another clock: re-based by the offset',
    }


def make_status(node, stamp):
    """The DiagnosticArray of the node's status now: ERROR while braking (the message names
    the joint and its speed) or holding after a contact (the joint and its torque), while
    the joint states come from several publishers (the message names them) or a mismatching
    effort controller is refused, WARN while stale, waiting, failing or re-basing stamps of
    another clock."""
    values = status_values(node)
    values['joint_states publishers'] = node.sources or 'one'
    timing = node.loop.timing if node.loop else None
    if node.mode.startswith('braking'):
        level, message = DiagnosticStatus.ERROR, f'{node.mode}: {node.loop.modes.fault}'
    elif node.mode.startswith('holding: contact'):
        level, message = DiagnosticStatus.ERROR, f'{node.mode}: {node.loop.modes.contact}'
    elif node.sources is not None or node.mode.startswith('refused'):
        level, message = DiagnosticStatus.ERROR, f'{node.mode}; {node.sources or ""}'.rstrip('; ')
    elif node.mode.startswith(('stale', 'waiting', 'law')) or (timing and not timing.clock.usable):
        level, message = DiagnosticStatus.WARN, node.mode
    elif node.loop and node.loop.adaptation.startswith('adaptation paused'):
        level, message = DiagnosticStatus.WARN, f'{node.mode}; {node.loop.adaptation}'
    else:
        level, message = DiagnosticStatus.OK, node.mode
    status = DiagnosticStatus(
        level=level, name=STATUS_NAME, message=message, hardware_id=node.config.model.name,
        values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = stamp
    return msg
