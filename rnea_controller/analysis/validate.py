"""`rnea-validate BAG`: turn a recorded run of the controller into a verdict, without ROS.

Reads the bag (`bagio`) once, chunk by chunk, through the statistics: tracking, timing,
saturation and model residual (`metrics`), effective delay (`delay`), range of motion
(`motion`) and, with --identify, every moving body's inertial parameters and each joint's
armature and friction (`identify`), checked on held-out rows (a second bag, --holdout).
Writes report.json, report.md (`report`), PNG plots (`plots`) and identified_parameters.yaml
into the output directory. --params-file takes a parameters file of the node (e.g. the one
identified from an earlier bag): its links, armature, friction and payload make the model
the residual is computed with and the identification starts from.
A bag of joint states alone (no reference topic: a recording made under any other driver,
a vendor's controller, a trajectory controller, teleoperation) is enough to identify and to
check what it can: the states' timing and gaps, the ranges, the model's residual; the checks
that need the controller's reference and commands (tracking, effective delay, saturation,
the idle-run check on the reference) are skipped, and the report says so and why. Velocities
may be absent: they are derived from the positions (`smoothing.Smoother`, zero-phase).
`--effort` says which torque the states' efforts are (`EFFORTS`).
Exit 0 when every check passes; 1 when one fails (thresholds given, and always: an idle run,
non-finite or over-limit commands); 2 on bad input (missing topic, empty or corrupt bag,
unknown joints, a URDF that does not match the bag).

Python API (used by the demo):

    result = validate_bag('demo_output/bag', 'demo_output/validation')
    print(result.table()); result.passed; result.failures
"""
import argparse
from dataclasses import dataclass, field
import json
import math
from pathlib import Path
import sys

import numpy as np

from rnea_controller.analysis import bagio, metrics
from rnea_controller.analysis.delay import DelayStats
from rnea_controller.analysis.identify import (
    Identification,
    parameters_from_file,
    parameters_yaml,
    read_masses,
    WIDTHS,
    WINDOWS,
)
from rnea_controller.analysis.motion import (
    motion_failures,
    motion_report,
    RangeStats,
    recording_failures,
)
from rnea_controller.analysis.report import format_markdown, format_table
from rnea_controller.analysis.smoothing import Smoother
from rnea_controller.control.law import validate_parameters
from rnea_controller.dynamics.model import RobotModel
from rnea_controller.errors import BagError, ParameterError, RneaControllerError
from rnea_controller.interrupt import interrupt_once

DEFAULT_TOPICS = {
    'joint_states': '/joint_states',
    'reference': '/rnea_controller/reference',
    'commands': '/effort_controller/commands',
    'diagnostics': '/diagnostics',
    'robot_description': '/robot_description',
}

# name: (what it bounds, unit, check(report) -> measured value)
THRESHOLDS = {
    'max_rms_error': ('tracking error RMS, worst joint', 'rad',
                      lambda r: _worst(r['tracking']['joints'], 'rms')),
    'max_error': ('tracking error max, worst joint', 'rad',
                  lambda r: _worst(r['tracking']['joints'], 'max')),
    'max_saturation': ('share (0..1) of commands at the effort limit, worst joint', '',
                       lambda r: _worst(r['saturation']['joints'], 'share')),
    'max_jitter': ('loop period jitter p99', 'us',
                   lambda r: r['loop']['jitter_us'].get('p99', math.nan)),
    'max_missed_ticks': ('missed control ticks', '', lambda r: r['loop']['missed_ticks']),
    'max_gap': ('longest gap of reference or joint states', 'ms', lambda r: _longest_gap(r)),
    'min_rate': ('loop rate', 'Hz', lambda r: r['loop']['rate_hz']),
    'max_residual_rms': ('model residual RMS, worst joint', 'N·m',
                         lambda r: _worst(r['residual']['joints'], 'rms')),
    'max_payload': ('|estimated payload|', 'kg', lambda r: _abs(r['residual']['payload_kg'])),
}
PROGRESS_MIN_MESSAGES = 50_000
# --effort: which torque the joint states' efforts are, and what the model then includes
EFFORTS = {
    'applied': 'the joint torques the arm applies (the ros2_control effort state interface): '
               'the rigid bodies, the rotor inertia (armature) and the friction',
    'measured': "link-side measured joint torques (a joint torque sensor, as Franka's tau_J): "
                'the rigid bodies and the friction after the sensor; the rotor inertia is on '
                "the motor's side, so the model's armature is 0 (a file's is dropped)",
    'commanded': "the torques commanded to the drives: what the arm applies plus the drives' "
                 'torque-tracking error, which stays in the residual',
}
DEFAULT_EFFORT = 'applied'
# checks of a controller's run that a bag of joint states alone cannot make
NO_REFERENCE = ('no {topic} topic: the bag holds the joint states of whatever drove the arm, '
                "not this controller's reference and commands")
SKIPPED_CHECKS = {'tracking': 'tracking error', 'delay': 'effective delay',
                  'saturation': 'commands at or beyond the effort limit',
                  'loop': "the controller loop's timing (the joint states' is reported)",
                  'idle_reference': 'idle run (the reference); the measured range is checked'}
SKIPPED_THRESHOLDS = {'max_rms_error', 'max_error', 'max_saturation'}


def _abs(value):
    return math.nan if value is None else abs(value)


def _worst(joints, key):
    values = [v[key] for v in joints.values() if not math.isnan(v[key])]
    return max(values) if values else math.nan


def _longest_gap(report):
    gaps = report['loop']['gaps'] + report['joint_states']['gaps']
    return max((g['duration_ms'] for g in gaps), default=0.0)


@dataclass
class ValidationResult:
    """The verdict on one bag: the report (as in report.json), failures, written files."""

    report: dict
    failures: list = field(default_factory=list)
    files: dict = field(default_factory=dict)

    @property
    def passed(self):
        return not self.failures

    def table(self):
        """The terminal summary: per-joint figures, loop timing, each gap, the payload."""
        return format_table(self.report, self.failures)


# ---------------------------------------------------------------------------- setup


def load_model(bag, topics, urdf_path, locked_joints=None):
    """The model from `urdf_path`, else from the bag's robot_description message."""
    if urdf_path is not None:
        return RobotModel.from_urdf_file(urdf_path, locked_joints=locked_joints), str(urdf_path)
    topic = topics['robot_description']
    if topic not in bag.topics:
        raise BagError(f'bag {str(bag.path)!r} has no {topic!r} topic to take the model '
                       'from; pass the URDF with --urdf')
    bag.require(topic, bagio.STRING)
    model = RobotModel.from_urdf_string(bag.first(topic).data, locked_joints=locked_joints)
    return model, topic


def absent_joints(bag, topics, model):
    """{joint: value} of the model joints the first joint state lacks and the reference does
    not name (joints nobody controls, e.g. a gripper's fingers): a mimic joint at its offset
    (its relation with the leader at 0), else 0 [rad or m], as the node takes them when their
    leader is absent too. Nothing if the reference names joints the model does not have, or
    (a bag of joint states alone) if the states name none of the model's."""
    bag.require(topics['joint_states'], bagio.JOINT_STATE)
    carried = set(bag.first(topics['joint_states']).name)
    if topics['reference'] in bag.topics:
        bag.require(topics['reference'], bagio.JOINT_STATE)
        controlled = set(bag.first(topics['reference']).name)
        if not controlled <= set(model.joint_names):  # another robot: check_joints says so
            return {}
        carried |= controlled
    elif not carried & set(model.joint_names):  # another robot's URDF: check_states says so
        return {}
    offsets = {model.joint_names[i]: offset for i, _, _, offset in model.mimic}
    return {name: offsets.get(name, 0.0) for name in model.joint_names if name not in carried}


def check_joints(bag, topics, model):
    """(reference joint names, first reference stamp [ns], its bag time [ns]) after checking
    names against model."""
    for key, msgtype in (('joint_states', bagio.JOINT_STATE), ('reference', bagio.JOINT_STATE),
                         ('commands', bagio.FLOAT64_ARRAY)):
        bag.require(topics[key], msgtype)
    state_names = list(bag.first(topics['joint_states']).name)
    missing = [n for n in model.joint_names if n not in state_names]
    if missing:
        raise BagError(f'the URDF does not match the bag: model joints {missing} are not in '
                       f'{topics["joint_states"]} (it has {state_names})')
    run_start, ref = bag.first_stamped(topics['reference'])
    names = tuple(ref.name)
    unknown = [n for n in names if n not in model.joint_names]
    if unknown or not names:
        raise BagError(f'{topics["reference"]} names joints {list(names)}; '
                       f'{unknown or "none"} unknown to the model (its joints: '
                       f'{", ".join(model.joint_names)})')
    width = len(bag.first(topics['commands']).data)
    if width != len(names):
        raise BagError(f'{topics["commands"]} carries {width} values but '
                       f'{topics["reference"]} names {len(names)} joints {list(names)}')
    stamp = ref.header.stamp.sec * 1_000_000_000 + ref.header.stamp.nanosec
    return names, stamp or bag.start_ns, run_start


def check_states(bag, topics, model):
    """(the model's joints, first joint-state stamp [ns], bag start [ns]) of a bag of joint
    states alone, after checking that they name every model joint and carry efforts."""
    topic = topics['joint_states']
    bag.require(topic, bagio.JOINT_STATE)
    first = bag.first(topic)
    missing = [n for n in model.joint_names if n not in first.name]
    if missing:
        raise BagError(f'the URDF does not match the bag: model joints {missing} are not in '
                       f'{topic} (it has {list(first.name)})')
    if len(first.effort) != len(first.name) or len(first.position) != len(first.name):
        raise BagError(f'{topic} carries {len(first.position)} positions and '
                       f'{len(first.effort)} efforts for {len(first.name)} joints: a bag '
                       "without the controller's reference needs both, one per joint")
    stamp = first.header.stamp.sec * 1_000_000_000 + first.header.stamp.nanosec
    return tuple(model.joint_names), stamp or bag.start_ns, bag.start_ns


class _Analysis:
    """Every statistic of one run, fed chunk by chunk from the bag."""

    def __init__(self, model, names, t0, run_start, payload_link, identify=None,
                 prior_friction=None, holdout=False, tracked=True, mesh_dirs=()):
        self.model, self.names = model, names
        self.tracked = tracked  # False: joint states alone (no reference, no commands)
        self.derivatives = None if tracked else Smoother(decimate=1)  # the residual's q̇, q̈
        self.run_start = run_start  # bag time [ns] of the controller's first reference
        self.before_run = 0  # joint states recorded before it
        self.identification = None if identify is None else Identification(
            model, payload_link, prior_friction=prior_friction, holdout=holdout,
            mesh_dirs=mesh_dirs, **identify)
        self.columns = [model.joint_index(n) for n in names]
        limits = model.effort_limits[self.columns]
        self.loop = metrics.TimingStats(t0)
        self.states = metrics.TimingStats(t0)
        self.tracking = metrics.TrackingStats(names, t0)
        self.saturation = metrics.SaturationStats(names, limits, t0)
        self.residual = metrics.ResidualStats(model, payload_link, t0)
        self.delay = DelayStats(names, t0)
        self.reference_range = RangeStats(len(names))
        self.measured_range = RangeStats(len(names))
        self.malformed = {'joint_states': 0, 'reference': 0, 'commands': 0}
        self.diagnostics = _Diagnostics()

    def feed(self, key, chunk):
        if key == 'diagnostics':
            self.diagnostics.add(chunk)
            return
        self.malformed[key] += chunk.malformed
        if key == 'joint_states':
            q = chunk.position[:, self.columns]
            if self.tracked:
                self.tracking.update(js_stamps=chunk.stamps, q=q)  # these two pair the states
                self.delay.update(js_stamps=chunk.stamps, q=q)  # with the references by stamps
            chunk = self._in_run(chunk)
            self.states.update(chunk.stamps)
            self.measured_range.update(chunk.position[:, self.columns])
            self._residual(chunk)
            if self.identification is not None:
                self.identification.update(chunk.stamps, chunk.position, chunk.velocity,
                                           chunk.effort)
        elif key == 'reference':
            self.loop.update(chunk.stamps)
            self.tracking.update(ref_stamps=chunk.stamps, q_d=chunk.position)
            self.delay.update(ref_stamps=chunk.stamps, q_d=chunk.position)
            self.reference_range.update(chunk.position)
        else:
            self.saturation.update(chunk.recv, chunk.data)

    def _residual(self, chunk):
        """The node's states (1 kHz, even stamps, measured velocities) go to `ResidualStats`
        as they are; a recording's (irregular stamps, velocities perhaps absent) through the
        identification's `Smoother`, which fits on the stamps as they are."""
        if self.derivatives is None:
            self.residual.update(chunk.stamps, chunk.position, chunk.velocity, chunk.effort)
            return
        out = self.derivatives.update(chunk.stamps, chunk.position, chunk.velocity,
                                      chunk.effort)
        if out is not None:
            self.residual.add(*out)

    def _in_run(self, chunk):
        """The joint states recorded once the controller ran (from its first reference on).

        A bag started before the controller holds states of an arm nobody commanded yet (on its
        brakes, reporting zero effort: the payload fit read them as a negative payload), and
        the start-up's stalls; they are counted, and left out of everything but the tracking
        and the delay, which pair states with references by their stamps."""
        in_run = chunk.recv >= self.run_start
        if in_run.all():
            return chunk
        self.before_run += int(len(in_run) - np.sum(in_run))
        return chunk.rows(in_run)

    def report(self):
        identified = {} if self.identification is None else {
            'identification': self.identification.result()}
        if not self.tracked:
            return {**identified, **self._states_only()}
        delay = self.delay.result()
        return {**identified, 'loop': self.loop.result(),
                'joint_states': {**self.states.result(), 'before_run': self.before_run},
                'tracking': self.tracking.result(), 'saturation': self.saturation.result(),
                'residual': self.residual.result(), 'malformed': self.malformed,
                'diagnostics': self.diagnostics.result(), 'delay': delay,
                'motion': motion_report(self.names, self.reference_range, self.measured_range,
                                        delay)}


    def _states_only(self):
        """The report of a bag of joint states alone: the checks it cannot make are empty and
        listed in 'skipped'; the loop is the joint states' own timing."""
        states = {**self.states.result(), 'before_run': 0}
        measured, _ = self.measured_range.result()
        return {'loop': {**states, 'source': 'joint_states'}, 'joint_states': states,
                'tracking': {'joints': {}}, 'saturation': {'joints': {}, 'commands': 0},
                'residual': self.residual.result(), 'malformed': self.malformed,
                'diagnostics': self.diagnostics.result(),
                'delay': {'joints': {}, 'overall': {'tau_ms': None}, 'samples': 0},
                'motion': {}, 'measured_range': dict(zip(self.names, measured.tolist()))}


class _Diagnostics:
    """Counts of statuses by level and the last values of each status name (bounded)."""

    LEVELS = ('OK', 'WARN', 'ERROR', 'STALE')

    def __init__(self):
        self.levels = {}
        self.last = {}

    def add(self, statuses):
        for s in statuses:
            counts = self.levels.setdefault(s.name, dict.fromkeys(self.LEVELS, 0))
            counts[self.LEVELS[s.level] if 0 <= s.level < 4 else 'ERROR'] += 1
            self.last[s.name] = {'message': s.message, **s.values}

    def result(self):
        return {'levels': self.levels, 'last': self.last}


# ---------------------------------------------------------------------------- the run


def validate_bag(bag_path, output_dir, urdf_path=None, topics=None, thresholds=None,
                 progress=True, payload_link=None, plots=True, chunk_size=20000,
                 locked_joints=None, identify=False, friction_velocity_width=None,
                 params_file=None, holdout=None, effort=DEFAULT_EFFORT, smoothing_window=None,
                 masses=None):
    """Validate one bag; write report.json, report.md and PNGs into `output_dir`.

    Args:
        bag_path: rosbag2 directory, .mcap or .db3 file
        output_dir: created if needed
        urdf_path: the model's URDF; default the bag's robot_description message
        topics: overrides of DEFAULT_TOPICS (same keys)
        thresholds: {name in THRESHOLDS: bound}; non-finite or over-limit commands always fail
        progress: show a progress bar on long bags (stderr)
        payload_link: link of the payload estimate; default the last joint's link
        plots: write the PNG plots
        chunk_size: messages per topic decoded at once (memory ∝ chunk_size, not bag length)
        locked_joints: joints of the URDF to treat as fixed (e.g. a gripper's fingers); the
            joints the joint states lack and the controller did not control are fixed too
            (`absent_joints`)
        identify: also identify every moving body's inertial parameters and each joint's
            armature and friction (`identify.py`); writes identified_parameters.yaml for the
            node's --params-file (a payload on `payload_link` is part of its link's body)
        friction_velocity_width: w [rad/s] of the friction model fc·tanh(qd / w), as the node's
            friction_velocity_width; None: chosen by the data (`identify.select`)
        smoothing_window: the identification's smoothing window [s]; None: chosen by the data
        masses: a YAML file {link: mass [kg]} (a vendor's table): the identification's prior
            masses and bounds for those bodies instead of the URDF's (`identify.read_masses`)
        params_file: a parameters file of the node (links.*, armature.*, friction.*,
            payload.*, gravity): the model is the node's with it, and the identification's prior
        holdout: a second bag of the same arm: the identification's held-out check predicts
            its torques (default: blocks of this bag are held out)
        effort: which torque the joint states' efforts are, a key of `EFFORTS`
    Raises:
        RneaControllerError (BagError, UrdfError, ...) on bad input.
    """
    topics = {**DEFAULT_TOPICS, **(topics or {})}
    unknown = set(thresholds or {}) - set(THRESHOLDS)
    if unknown:
        raise BagError(f'unknown thresholds {sorted(unknown)}; known: {sorted(THRESHOLDS)}')
    if effort not in EFFORTS:
        raise BagError(f'unknown effort {effort!r}; known: {sorted(EFFORTS)}')
    with bagio.BagReader(bag_path) as bag:
        bag.require_messages()
        model, source = load_model(bag, topics, urdf_path, locked_joints)
        absent = absent_joints(bag, topics, model)
        if absent:  # a gripper's fingers the states do not carry: fixed, as the node takes them
            model, source = load_model(bag, topics, urdf_path, {**dict.fromkeys(
                locked_joints or (), 0.0), **absent})
        tracked = topics['reference'] in bag.topics
        check = check_joints if tracked else check_states
        names, t0, run_start = check(bag, topics, model)
        model, prior_friction, carried = _configured(model, names, params_file)
        if effort == 'measured':  # a link-side sensor does not feel the rotor's inertia
            model = model.with_armature(np.zeros(model.n))
        payload_link = payload_link or metrics.last_link(model)
        model.link_frame(payload_link)
        options = {'width': friction_velocity_width, 'window_s': smoothing_window,
                   **read_masses(masses, model)}
        analysis = _Analysis(model, names, t0, run_start, payload_link,
                             options if identify else None, prior_friction,
                             holdout is not None, tracked, _mesh_dirs(urdf_path))
        _stream(bag, topics, model, names, analysis, progress, chunk_size)
        if identify and holdout is not None:
            _stream_holdout(holdout, topics, model, analysis.identification, chunk_size)
        report = _summary(bag, topics, model, source, names, analysis)
        report['effort'] = {'kind': effort, 'meaning': EFFORTS[effort]}
        if not tracked:
            reason = NO_REFERENCE.format(topic=topics['reference'])
            report['skipped'] = {'reason': reason, 'checks': dict(SKIPPED_CHECKS)}
        if params_file is not None:
            report['model'].update(params_file=str(params_file), params_file_payload=carried)
    failures = check_thresholds(report, thresholds or {})
    failures += [f'identification: {f}' for f in report.get('identification', {}).get(
        'failures', [])]
    report['thresholds'] = {k: float(v) for k, v in (thresholds or {}).items()}
    report['failures'] = failures
    report['passed'] = not failures
    files = write_outputs(Path(output_dir), report, failures, analysis if plots else None,
                          model)
    return ValidationResult(report, failures, files)


def _mesh_dirs(urdf_path):
    """Where the URDF's meshes may be: its folder and those above it (a package:// path's
    package is one of them), for the identification's bounding volumes."""
    return () if urdf_path is None else tuple(Path(urdf_path).resolve().parents)


def _configured(model, names, params_file):
    """(the model with the parameters file's links, armature, payload and gravity; the prior
    friction (viscous, coulomb, offset, stribeck) per model joint; the file's payload link or
    ''), or (model, None, '') without a file."""
    if params_file is None:
        return model, None, ''
    values = parameters_from_file(params_file)
    values = {k: v for k, v in values.items() if k not in ('robot_description',)}
    try:
        cfg = validate_parameters({**values, 'joints': list(names)}, model)
    except ParameterError as error:
        raise ParameterError(f'--params-file {params_file}: {error}') from None
    viscous, coulomb = np.array(model.damping), np.array(model.friction)
    offset, stribeck = np.zeros(model.n), np.zeros(model.n)
    viscous[cfg.index], coulomb[cfg.index] = cfg.viscous, cfg.coulomb
    offset[cfg.index], stribeck[cfg.index] = cfg.offset, cfg.stribeck
    return cfg.model, (viscous, coulomb, offset, stribeck), values.get('payload.link') or ''


def _stream_holdout(path, topics, model, identification, chunk_size):
    """Feed the joint states of a second bag (the held-out motion) to the identification."""
    topic = topics['joint_states']
    with bagio.BagReader(path) as bag:
        bag.require_messages()
        bag.require(topic, bagio.JOINT_STATE)
        names = list(bag.first(topic).name)
        missing = [n for n in model.joint_names if n not in names]
        if missing:
            raise BagError(f'held-out bag {str(path)!r}: model joints {missing} are not in '
                           f'{topic} (it has {names})')
        for _, chunk in bag.stream({topic: ('joint_state', model.joint_names)}, chunk_size):
            identification.update(chunk.stamps, chunk.position, chunk.velocity, chunk.effort,
                                  held_out=True)


def _stream(bag, topics, model, names, analysis, progress, chunk_size):
    keys = {topics['joint_states']: 'joint_states'}
    specs = {topics['joint_states']: ('joint_state', model.joint_names)}
    if analysis.tracked:
        keys.update({topics['reference']: 'reference', topics['commands']: 'commands'})
        specs.update({topics['reference']: ('joint_state', names),
                      topics['commands']: ('array', len(names))})
    if topics['diagnostics'] in bag.topics:
        keys[topics['diagnostics']] = 'diagnostics'
        specs[topics['diagnostics']] = ('diagnostics', None)
    total = sum(bag.topics[t][1] for t in specs)
    with _ProgressBar(progress and total >= PROGRESS_MIN_MESSAGES, total) as advance:
        for topic, chunk in bag.stream(specs, chunk_size, advance):
            analysis.feed(keys[topic], chunk)


class _ProgressBar:
    """A rich progress bar on stderr (or nothing); yields the advance(count) callback."""

    def __init__(self, enabled, total):
        self.enabled, self.total, self.bar = enabled, total, None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress
        self.bar = Progress(console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task('reading bag', total=self.total)
        return lambda count: self.bar.advance(task, count)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


def _summary(bag, topics, model, source, names, analysis):
    report = analysis.report()
    report['bag'] = {'path': str(bag.path), 'topics': {t: {'type': m, 'messages': c}
                                                        for t, (m, c) in bag.topics.items()},
                     'used_topics': topics}
    report['model'] = {'name': model.name, 'source': source, 'joints': list(model.joint_names),
                       'controlled_joints': list(names),
                       'effort_limits': model.effort_limits.tolist()}
    return report


def check_thresholds(report, thresholds):
    """Failure messages: always an idle run (`motion`), non-finite or over-limit commands;
    then each threshold given (of a bag of joint states alone, those it can measure: the
    others are listed in report['skipped'])."""
    states_only = 'skipped' in report
    failures = (recording_failures(report['measured_range']) if states_only
                else motion_failures(report['motion']))
    for joint, s in report['saturation']['joints'].items():
        if s['non_finite']:
            failures.append(f"{joint}: {s['non_finite']} non-finite commands")
        if s['over_limit']:
            failures.append(f"{joint}: {s['over_limit']} commands beyond the effort limit "
                            f"{s['limit']:g} N·m (max |tau| {s['max_abs']:g})")
    if report['malformed']['commands']:
        failures.append(f"{report['malformed']['commands']} commands with a wrong length")
    for name, bound in thresholds.items():
        what, unit, measure = THRESHOLDS[name]
        if states_only and name in SKIPPED_THRESHOLDS:
            report['skipped']['checks'][name] = f'--{name.replace("_", "-")} {bound:g}'
            continue
        value = float(measure(report))
        ok = value >= bound if name.startswith('min_') else value <= bound
        if not ok:
            kind = 'minimum' if name.startswith('min_') else 'limit'
            failures.append(f'{what}: {value:.6g} {unit} ({kind} {bound:g} {unit})')
    return failures


# ---------------------------------------------------------------------------- output


def _plain(value):
    """JSON-safe copy: numpy scalars to Python, NaN and inf to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


PARAMETERS_FILE = 'identified_parameters.yaml'
REJECTED_SUFFIX = '.old'  # an earlier file, renamed when this run's fit fails its checks


def write_outputs(output_dir, report, failures, analysis, model=None):
    """Write report.json, report.md, the plots and, after --identify, the parameters file
    (checked against `model`) when the fit passed its own checks (`identify.checks`), else
    none: an earlier one there is renamed with REJECTED_SUFFIX (the report says so), as it is
    not this run's; return {kind: path}."""
    output_dir.mkdir(parents=True, exist_ok=True)
    files = {'json': output_dir / 'report.json', 'markdown': output_dir / 'report.md'}
    if 'identification' in report:
        files.update(_parameters_file(output_dir, report, model))
    files['json'].write_text(json.dumps(_plain(report), indent=2) + '\n')
    files['markdown'].write_text(format_markdown(report, failures))
    if analysis is not None:
        files.update(_write_plots(output_dir, report, analysis))
    return files


def _parameters_file(output_dir, report, model):
    """{'parameters': path} written, or {'previous_parameters': renamed path} or {} when the
    identification failed; report['identification']['file'] says which."""
    ident, path = report['identification'], output_dir / PARAMETERS_FILE
    if not ident['failures']:
        path.write_text(parameters_yaml(ident, model, report['model']['controlled_joints'],
                                        clear_payload=bool(report['model'].get(
                                            'params_file_payload'))))
        ident['file'] = {'written': str(path), 'renamed': None}
        return {'parameters': path}
    renamed = None
    if path.exists():
        renamed = path.with_name(path.name + REJECTED_SUFFIX)
        path.replace(renamed)
    ident['file'] = {'written': None, 'renamed': None if renamed is None else str(renamed)}
    return {} if renamed is None else {'previous_parameters': renamed}


def _write_plots(output_dir, report, analysis):
    from rnea_controller.analysis import plots
    names, model = analysis.names, analysis.model
    if not analysis.tracked:
        return _write_residual_plots(output_dir, report, analysis)
    limits = [model.position_limits[model.joint_index(n)] if n in model.joint_names else None
              for n in names]
    files = {
        'position_plot': plots.position_plot(output_dir / 'position.png',
                                             analysis.tracking.desired,
                                             analysis.tracking.measured, names,
                                             None if any(x is None for x in limits)
                                             else limits),
        'tracking_plot': plots.tracking_plot(output_dir / 'tracking_error.png',
                                             analysis.tracking.envelope, names),
        'torque_plot': plots.torque_plot(output_dir / 'torque.png',
                                         analysis.saturation.envelope, names,
                                         analysis.saturation.limits),
        'period_plot': plots.period_plot(output_dir / 'period_histogram.png', {
            'reference (loop)': analysis.loop.periods,
            'joint states': analysis.states.periods}),
    }
    if report['delay']['samples']:
        files['delay_plot'] = plots.delay_plot(output_dir / 'effective_delay.png',
                                               report['delay'])
    return {**files, **_write_residual_plots(output_dir, report, analysis, periods=False)}


def _write_residual_plots(output_dir, report, analysis, periods=True):
    """The residual plot, if any residual, and (`periods`) the joint states' period plot."""
    from rnea_controller.analysis import plots
    files = {}
    if periods:
        files['period_plot'] = plots.period_plot(output_dir / 'period_histogram.png', {
            'joint states': analysis.states.periods})
    if analysis.residual.count.any():
        files['residual_plot'] = plots.residual_plot(
            output_dir / 'model_residual.png', analysis.residual.envelope,
            analysis.model.joint_names, report['residual']['payload_kg'])
    return files


# ---------------------------------------------------------------------------- CLI


def build_parser():
    parser = argparse.ArgumentParser(
        prog='rnea-validate', description='Validate a recorded run of rnea_controller from its '
        'rosbag2 bag (sqlite3 or MCAP): tracking error, saturation, loop timing, model residual; '
        "or identify and check a model from a bag of any driver's joint states (positions and "
        'efforts; no reference topic: the tracking checks are skipped).',
        epilog='exit status: 0 every check passed, 1 a check failed (thresholds; non-finite or '
        'over-limit commands always fail), 2 bad input (missing topic, empty or corrupt bag, '
        'unknown joints, URDF not matching the bag), 3 an unexpected error (--debug shows its '
        'traceback), 130 interrupted (Ctrl-C)')
    parser.add_argument('bag', help='rosbag2 directory, .mcap or .db3 file')
    parser.add_argument('-o', '--output', help='output directory (default: <bag>_validation)')
    parser.add_argument('--urdf', help="robot URDF (default: the bag's robot_description)")
    for key, topic in DEFAULT_TOPICS.items():
        parser.add_argument(f"--{key.replace('_', '-')}-topic", dest=f'topic_{key}',
                            default=topic, metavar='TOPIC', help=f'default {topic}')
    parser.add_argument('--payload-link', help='link of the payload estimate '
                        '(default: the link of the last joint)')
    parser.add_argument('--identify', action='store_true', help="identify every moving "
                        "body's mass, centre of mass and inertia and each joint's armature, "
                        'viscous and Coulomb friction (physically consistent, regularised '
                        "toward the URDF); write identified_parameters.yaml (for the node's "
                        '--params-file)')
    parser.add_argument('--holdout', metavar='BAG2', help='with --identify: a second bag of '
                        'another motion whose torques the identified model must predict '
                        '(default: one 2-second block in every 5 of BAG is held out)')
    parser.add_argument('--params-file', metavar='YAML', help='parameters file of the node '
                        '(e.g. an earlier identified_parameters.yaml): the model is the '
                        "node's with it, and --identify starts from it")
    parser.add_argument('--effort', choices=sorted(EFFORTS), default=DEFAULT_EFFORT,
                        help="which torque the joint states' efforts are: " + '; '.join(
                            f'{k}: {v}' for k, v in EFFORTS.items())
                        + f' (default {DEFAULT_EFFORT})')
    parser.add_argument('--friction-velocity-width', type=float, metavar='RAD_S',
                        help="w of the friction model fc·tanh(qd / w), as the node's "
                        'friction_velocity_width (default: chosen by cross-validation of the '
                        f"identification's data among {', '.join(map(str, WIDTHS))})")
    parser.add_argument('--masses', metavar='FILE', help='with --identify: a YAML file '
                        "{link: mass [kg]} (e.g. the vendor's table of link masses): the prior "
                        "masses and bounds of those bodies instead of the URDF's")
    parser.add_argument('--smoothing-window', type=float, metavar='S',
                        help="the identification's smoothing window [s] (default: chosen by "
                        "cross-validation of the identification's data among "
                        f"{', '.join(map(str, WINDOWS))})")
    parser.add_argument('--locked-joints', nargs='+', metavar='JOINT',
                        help='URDF joints to treat as fixed at 0 (e.g. gripper fingers)')
    for name, (what, unit, _) in THRESHOLDS.items():
        side = 'below' if name.startswith('min_') else 'above'
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, dest=name,
                            metavar=unit.upper().replace('·', '') or 'X',
                            help=f'fail when {what} is {side} this'
                            + (f' [{unit}]' if unit else ''))
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    parser.add_argument('--debug', action='store_true', help='show tracebacks')
    return parser


def main(argv=None):
    """Console script: exit 0 pass, 1 a check failed, 2 bad input, 3 unexpected, 130 Ctrl-C."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.holdout and not args.identify:
        parser.error("--holdout BAG2 is the identification's held-out check: add --identify")
    bag = Path(args.bag)
    output = Path(args.output) if args.output else bag.parent / f'{bag.stem}_validation'
    thresholds = {k: getattr(args, k) for k in THRESHOLDS if getattr(args, k) is not None}
    topics = {k: getattr(args, f'topic_{k}') for k in DEFAULT_TOPICS}
    interrupt_once()
    try:
        result = validate_bag(bag, output, urdf_path=args.urdf, topics=topics,
                              thresholds=thresholds, progress=not args.no_progress,
                              payload_link=args.payload_link, plots=not args.no_plots,
                              locked_joints=args.locked_joints, identify=args.identify,
                              friction_velocity_width=args.friction_velocity_width,
                              smoothing_window=args.smoothing_window, masses=args.masses,
                              params_file=args.params_file, holdout=args.holdout,
                              effort=args.effort)
    except KeyboardInterrupt:  # Ctrl-C: no traceback, the shell's code for it
        print('rnea-validate: interrupted', file=sys.stderr)
        return 130
    except RneaControllerError as error:
        if args.debug:
            raise
        print(f'rnea-validate: error: {error}', file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - never a traceback for the user
        if args.debug:
            raise
        print(f'rnea-validate: unexpected error ({type(error).__name__}: {error}); '
              'rerun with --debug for the traceback', file=sys.stderr)
        return 3
    print(result.table(), end='')
    print(f'reports and plots in {output}/')
    return 0 if result.passed else 1


if __name__ == '__main__':
    sys.exit(main())
