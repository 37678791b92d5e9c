"""Every controller parameter, stated once: type, default, unit, range, rule, when it may change.

ROS-free, in the spirit of ros2_controllers' generate_parameter_library YAML. From this table
follow the node's declarations (`ros/parameters.py`: descriptors with ranges), the checks
(`check`, called by `control.law.validate_parameters`), the comments of config/controller.yaml
(`render_yaml`, a test keeps the file equal to it) and the README's table (`render_markdown`):

    python -m rnea_controller.control.parameters --markdown
    python -m rnea_controller.control.parameters --yaml > config/controller.yaml

Per-joint families are written with '<joint>' (e.g. 'gains.<joint>.p'): one parameter per
controlled joint, declared once the model is known. A default of None means unset (the law
then uses the documented fallback). `change` says when a value may be set:
'always' (between two ticks), 'inactive' (not while the loop runs), 'unconfigured'.

Model-dependent rules (a joint of the model, at most the URDF effort limit, a known payload
link, a finite law) are checked by `validate_parameters` in control/law.py, which calls `check`
for the ranges stated here.
"""
import array
from dataclasses import dataclass
import functools
import math
import sys

from rnea_controller.errors import ParameterError

JOINT = '<joint>'
LINK = '<link>'  # per moving body: the child link of an actuated joint (issue 30)
CHANGES = ('always', 'inactive', 'unconfigured')


@dataclass(frozen=True)
class Spec:
    """One parameter (or per-joint family): its type, default, unit, bounds and rule.

    kind: 'bool', 'int', 'double', 'string', 'string_array' or 'double_array' (`size` values);
    low, high: inclusive bounds of a number or of each array element (None: unbounded);
    choices: the allowed strings; rule: extra check, (value) -> error text or None.
    """

    name: str
    kind: str
    default: object
    unit: str
    description: str
    change: str = 'always'
    low: float = None
    high: float = None
    choices: tuple = ()
    size: int = 0
    rule: object = None
    low_exclusive: bool = False
    dynamic: bool = False  # any ROS type; `rule` checks and `kind` is the usual one

    @property
    def per_joint(self) -> bool:
        return JOINT in self.name

    @property
    def per_link(self) -> bool:
        return LINK in self.name

    def bounds_text(self) -> str:
        """The range or choices as text, e.g. '[0, 1e+06]', "one of 'a', 'b'"."""
        if self.choices:
            return 'one of ' + ', '.join(self.choices)
        if self.low is None and self.high is None:
            return ''
        opening = '(' if self.low_exclusive else '['
        return f'{opening}{self.low:g}, {self.high:g}]'


def latency_setting(value: object) -> str | float:
    """latency_compensation -> 'auto', 'off' or a fixed latency [s] (float); ValueError if
    none. Typed as users type it: YAML and `ros2 param set` make `off` a bool false and
    `0.002` a double, so those are taken as well as the strings."""
    if value is False or value in ('auto', 'off'):
        return 'off' if value is False else value
    if isinstance(value, bool):
        raise ValueError('true is ambiguous')
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0.0 <= seconds <= 0.1:
        raise ValueError('out of range')
    return seconds


def _latency(value):
    """latency_compensation: 'auto', 'off' (or false) or a fixed latency in [0, 0.1] s."""
    try:
        latency_setting(value)
    except ValueError:
        return "must be 'auto', 'off' or a latency in seconds within [0, 0.1], e.g. 0.002"
    return None


def _unique(value):
    if len(set(value)) != len(value):
        return 'a joint is listed twice'
    return None


def _symmetric(bound):
    return {'low': -bound, 'high': bound}


TABLE = (
    Spec('autostart', 'bool', True, '', 'configure and activate by itself once a model is '
         'available (else use the lifecycle services)', 'unconfigured'),
    Spec('robot_description', 'string', '', '', 'URDF text; empty: take it from the '
         'robot_description topic (transient local), as robot_state_publisher publishes it',
         'unconfigured'),
    Spec('joints', 'string_array', None, '', 'controlled joints, in command order; unset or '
         '[]: every actuated joint of the model but mimic joints and their leaders, in model '
         'order; joints not listed enter RNEA at their measured state, if absent at their mimic '
         'relation or 0',
         'unconfigured', rule=_unique),
    Spec('command_topic', 'string', 'effort_controller/commands', '', 'std_msgs/'
         'Float64MultiArray effort commands [N·m], ordered as joints: the topic of ros2_control'
         "'s effort_controllers/JointGroupEffortController (relative: a namespace applies)",
         'unconfigured'),
    Spec('joint_states_topic', 'string', 'joint_states', '', 'sensor_msgs/JointState input '
         '(any joint order, extra joints ignored, velocities optional)', 'unconfigured'),
    Spec('effort_controller', 'string', 'effort_controller', '', 'the ros2_control effort '
         "controller in this node's namespace whose `joints` parameter must equal ours: "
         'asked at activation if already seen (a mismatch refuses it), else the moment it '
         'appears (a mismatch stops the commands and deactivates)', 'unconfigured'),
    Spec('update_rate', 'int', 1000, 'Hz', 'control loop rate', 'inactive', 10, 10000),
    Spec('control_law', 'string', 'computed_torque', '', 'computed_torque: tau = RNEA(q, qd, '
         'qdd_d + Kp e + Kd ed), Kp [1/s^2], Kd [1/s]; feedforward_pd: tau = RNEA(q_d, qd_d, '
         'qdd_d) + Kp e + Kd ed, Kp [N·m/rad], Kd [N·m·s/rad]',
         choices=('computed_torque', 'feedforward_pd')),
    Spec('gains.<joint>.p', 'double', None, '1/s^2 or N·m/rad', 'proportional gain Kp; unset: '
         'critically damped at 20 rad/s: 400 1/s^2 (computed_torque), 400·M_ii(q0) N·m/rad '
         '(feedforward_pd)', low=0.0, high=1e6),
    Spec('gains.<joint>.d', 'double', None, '1/s or N·m·s/rad', 'derivative gain Kd; unset: 40 '
         '1/s (computed_torque), 40·M_ii(q0) N·m·s/rad (feedforward_pd)', low=0.0, high=1e6),
    Spec('feedback_inertia_floor', 'double', 0.0, 'kg·m^2', 'least inertia through which each '
         "joint's PD feedback acts, for arms whose rotor inertia is not told (geared arms before "
         'identification, docs/validation.md): computed_torque adds max(0, floor - M_ii(q0))·(Kp '
         'e + Kd ed); the feedforward_pd default gains scale by max(M_ii(q0), floor); 0: off',
         low=0.0, high=100.0),
    Spec('effort_limits.<joint>', 'double', None, 'N·m', 'effort limit override, at most the '
         'URDF <limit effort> (the smaller wins); unset: URDF; required where the URDF has none',
         low=0.0, high=1e5, low_exclusive=True),
    Spec('torque_rate_limit', 'double', 0.0, 'N·m/s', 'max |d tau/dt| per joint; 0: no rate '
         'limit', low=0.0, high=1e7),
    Spec('robot_compensates_gravity', 'bool', False, '', 'the arm adds g(q) itself (Franka, KUKA '
         'FRI): the published effort is the law minus g(q) at the measured q; the limits apply '
         'to what is published', 'inactive'),
    Spec('armature.<joint>', 'double', 0.0, 'kg·m^2', 'rotor inertia reflected through the '
         'gear (MuJoCo armature, Pinocchio model.armature), added to M_ii(q) wherever the law '
         'uses M: computed torque, the feedforward, the feedforward_pd default gains',
         low=0.0, high=1e4),
    Spec('friction_source', 'string', 'none', '', 'where the friction feedforward starts '
         'from: none (0; the online estimate, estimation.*, can take what the arm shows) or urdf '
         '(the URDF <dynamics damping friction>, which configure logs either way: tags such as '
         "example-robot-data's damping=1 friction=1 are often placeholders); friction.<joint>.* "
         'set explicitly (e.g. from rnea-validate --identify) apply with either',
         choices=('none', 'urdf')),
    Spec('friction.<joint>.viscous', 'double', None, 'N·m·s/rad', 'viscous friction feedforward '
         'b in tau_f = b·qd_d + c·tanh(qd_d / w) + f0 + s·tanh(qd_d / w)·exp(-(qd_d / v_s)^2) '
         '(control/friction.py; w = friction_velocity_width, v_s = friction_stribeck_velocity), '
         'from the desired velocity; unset: per friction_source (none: 0; urdf: <dynamics '
         'damping>)', low=0.0, high=1e4),
    Spec('friction.<joint>.coulomb', 'double', None, 'N·m', 'Coulomb friction feedforward c (see '
         'friction.<joint>.viscous); unset: per friction_source (none: 0; urdf: <dynamics '
         'friction>)', low=0.0, high=1e4),
    Spec('friction.<joint>.offset', 'double', None, 'N·m', 'constant torque f0 of the friction '
         'feedforward (see friction.<joint>.viscous): a bias, or with c the asymmetric Coulomb '
         'friction c ± f0 while moving up or down; unset: 0', low=-1e4, high=1e4),
    Spec('friction.<joint>.stribeck', 'double', None, 'N·m', 'Stribeck term s of the friction '
         'feedforward (see friction.<joint>.viscous): the friction at creep speed above c '
         '(s > 0: a static friction that falls with speed) or below it (s < 0: a friction '
         'that rises to c), over friction_stribeck_velocity; unset: 0', low=-1e4, high=1e4),
    Spec('friction_stribeck_velocity', 'double', 0.3, 'rad/s', 'velocity v_s over which the '
         'Stribeck excess fades, exp(-(qd_d / v_s)^2)', low=1e-3, high=10.0),
    Spec('friction_velocity_width', 'double', 0.01, 'rad/s', 'velocity scale of the smoothed '
         'sign tanh(qd_d / width) of the Coulomb feedforward', low=1e-6, high=10.0),
    Spec('estimation.forgetting_time', 'double', 1.0, 's', "time constant of the online "
         "estimate of each joint's missing rotor inertia a, viscous friction b and torque "
         'bias d (recursive least squares on the residual of the model at the measured '
         'acceleration over windows of 10 new joint states timed by their stamps, '
         'docs/controller.md); a enters M_ii (the feedback acts through it), b the friction '
         'feedforward and the stiffness (Kp·b/Kd), d the command; paused while the joint '
         'rests and its integral runs; under two windows it acts as two; 0: off (the law of '
         'issue 23)',
         low=0.0, high=100.0),
    Spec('estimation.max_armature', 'double', 1.0, 'kg·m^2', 'largest rotor inertia the '
         "estimate may add to a joint, and at most 0.01 kg·m^2 per N·m of the joint's effort "
         'limit (real rotors reflect 1-6e-3; viscous friction: at most effort limit / '
         'velocity limit; bias: integral_clamp)', low=0.0, high=100.0),
    Spec('integral_gain', 'double', 4000.0, '1/s^3', "Ki of the integral term, run while a "
         "joint's reference is at rest (holds, a trajectory's end), the joint slower than "
         '0.02 rad/s or moving away from its goal and, with the estimate on, its inertia '
         'measured once (a has seen accelerations): tau_i += dt·Ki·(M_ii(q0) + a + b/Kd)·e, '
         'clamped by integral_clamp; frozen while the joint saturates; cleared on '
         'activation, stale states and every gravity hold; 0: off',
         low=0.0, high=1e6),
    Spec('integral_clamp', 'double', 0.2, 'share', 'largest integral torque and estimated '
         "bias, each as a share of the joint's effort limit (ros2_control PID i_clamp)",
         low=0.0, high=1.0),
    Spec('payload.link', 'string', '', '', 'link carrying a known payload; empty: none'),
    Spec('payload.mass', 'double', 0.0, 'kg', 'payload mass', low=0.0, high=1000.0),
    Spec('payload.com', 'double_array', [0.0, 0.0, 0.0], 'm', 'payload centre of mass in the '
         'link frame, each coordinate', size=3, **_symmetric(10.0)),
    Spec('payload.inertia', 'double_array', [0.0] * 6, 'kg·m^2', 'payload inertia about its '
         'centre of mass, link axes: ixx ixy ixz iyy iyz izz', size=6, **_symmetric(1000.0)),
    Spec('links.<link>.mass', 'double', None, 'kg', "mass of the body moved by the link's "
         'joint: the link with every link fixed to it (and a payload carried while identified), '
         "replacing the URDF's; set with .com and .inertia (rnea-validate --identify writes "
         "them); unset: the URDF's", 'inactive', low=0.0, high=1e4, low_exclusive=True),
    Spec('links.<link>.com', 'double_array', None, 'm', "that body's centre of mass in the "
         'link frame, each coordinate', 'inactive', size=3, **_symmetric(10.0)),
    Spec('links.<link>.inertia', 'double_array', None, 'kg·m^2', "that body's inertia about "
         'its centre of mass, link axes: ixx ixy ixz iyy iyz izz (physically consistent)',
         'inactive', size=6, **_symmetric(1000.0)),
    Spec('gravity', 'double_array', [0.0, 0.0, -9.81], 'm/s^2', 'gravity in the base frame, '
         'each component', size=3, **_symmetric(100.0)),
    Spec('allow_partial_joints_goal', 'bool', False, '', 'accept trajectories naming only some '
         'joints; the others keep their desired position'),
    Spec('trajectory_limit_margin', 'double', 0.0, 'share', 'a trajectory (topic or action '
         'goal) is refused whole where a joint moves faster than (1 + margin) x its URDF '
         'velocity limit (at a point or between two) or where the torque the model needs at a '
         'point (RNEA of the reference: the acceleration the effort limits allow) is beyond '
         '(1 + margin) x its effort limit', low=0.0, high=1e6),
    Spec('state_timeout', 'double', 0.1, 's', 'a joint state older than this (since its '
         'arrival, steady clock) is stale; the presets of real arms set their own (20-50 ms)',
         low=1e-3, high=1.0),
    Spec('stale_policy', 'string', 'hold_then_stop', '', 'on stale state: hold_then_stop '
         '(the desired state brought to rest and held there by the law without states, for '
         'stale_hold_time, then no command), hold (until states return) or stop (no command '
         'at once)', choices=('hold_then_stop', 'hold', 'stop')),
    Spec('stale_hold_time', 'double', 1.0, 's', 'stop-and-hold time of hold_then_stop',
         low=0.0, high=60.0),
    Spec('final_command', 'string', 'gravity_hold', '', 'the one command published on '
         'deactivate, shutdown and Ctrl-C: gravity_hold (g(q) at the last measured position) '
         'or zero', choices=('gravity_hold', 'zero')),
    Spec('external_wrench_timeout', 'double', 0.1, 's', 'an ~/external_wrench older than this '
         'is no longer compensated; 0: never expires', low=0.0, high=60.0),
    Spec('law_failure_timeout', 'double', 0.5, 's', 'if the law stays non-finite this long '
         '(gravity hold of the last good configuration meanwhile), the node deactivates with '
         'its final command', low=0.0, high=60.0),
    # contact (the world pushes back): docs/controller.md, control/contact.py
    Spec('contact.detection', 'bool', True, '', 'watch the external torque of each controlled '
         "joint (De Luca's momentum observer on the model): beyond its threshold the trajectory "
         'is dropped (an action goal aborted), ERROR names the joint and the torque, and the '
         'measured position is held (mode holding: contact) until a new trajectory'),
    Spec('contact.threshold_share', 'double', 0.2, 'share', 'default contact threshold of '
         'each joint as a share of its effort limit (above what a wrong model shows: '
         'docs/controller.md); plus, always, the URDF <dynamics> friction the law does not '
         'feed forward: (damping - viscous) |qd| + (friction - coulomb)', low=0.0, high=10.0,
         low_exclusive=True),
    Spec('contact.velocity_allowance', 'double', 0.6, 'share', 'untold viscous friction the '
         'contact threshold allows for while a joint moves, as a share of its effort limit at '
         'its velocity limit: the threshold grows by this × effort limit × |qd| / velocity '
         'limit (a geared joint untold: docs/controller.md)', low=0.0, high=10.0),
    Spec('contact.<joint>.threshold', 'double', None, 'N·m', "the joint's contact threshold "
         "on |tau_ext| at rest (plus the allowances in motion); unset: contact.threshold_share × "
         'its effort limit', low=0.0, high=1e5, low_exclusive=True),
    Spec('contact.command_delay', 'double', 0.015, 's', 'how late a command may act on the arm '
         '(DDS, the driver, the controller_manager, a loop late on a busy host): while a '
         "joint's commands change, its contact threshold grows by how much they changed over "
         'this window (which of them acted is not known closer than that)', low=0.0, high=0.5),
    Spec('contact.bandwidth', 'double', 50.0, '1/s', "the observer's gain K_O: its estimate "
         'follows tau_ext with this bandwidth (time constant 1 / K_O)', low=1.0, high=1000.0),
    Spec('phase_lock', 'bool', True, '', "place the ticks just after the joint states' "
         'arrival (docs/timing.md)', 'inactive'),
    Spec('latency_compensation', 'string', 'auto', '', 'auto (measured online), off, or a '
         "fixed latency [s] such as 0.002, from a state's stamp to its command taking effect: "
         'the reference is sampled and the state predicted there (docs/timing.md)', 'inactive',
         rule=_latency, dynamic=True),
    Spec('velocity_source', 'string', 'auto', '', 'joint velocities: auto (measured if the '
         'states carry them, else estimated), measured, estimated', 'inactive',
         choices=('auto', 'measured', 'estimated')),
    Spec('velocity_filter_cutoff', 'double', 100.0, 'Hz', 'cut-off of the velocity estimate '
         'filter', low=1.0, high=5000.0),
    Spec('constraints.stopped_velocity_tolerance', 'double', 0.01, 'rad/s', 'a joint slower '
         'than this is stopped (as joint_trajectory_controller)', low=0.0, high=100.0),
    Spec('constraints.goal_time', 'double', 0.0, 's', 'time after the end of a trajectory to '
         'reach the goal tolerances; 0: no limit (as joint_trajectory_controller)',
         low=0.0, high=3600.0),
    Spec('constraints.<joint>.trajectory', 'double', 0.0, 'rad', 'largest position error '
         'while tracking; 0: not checked', low=0.0, high=100.0),
    Spec('constraints.<joint>.goal', 'double', 0.0, 'rad', 'largest position error at the '
         'goal; 0: not checked', low=0.0, high=100.0),
    Spec('state_publish_rate', 'double', 50.0, 'Hz', 'rate of ~/controller_state (published '
         'while it has subscribers)', 'inactive', low=0.1, high=1000.0),
    Spec('action_monitor_rate', 'double', 20.0, 'Hz', 'rate at which an action goal is checked '
         'and its feedback published', 'inactive', low=0.1, high=1000.0),
)
SPECS = {spec.name: spec for spec in TABLE}
GLOBAL = tuple(spec for spec in TABLE if not spec.per_joint and not spec.per_link)
PER_JOINT = tuple(spec for spec in TABLE if spec.per_joint)
PER_LINK = tuple(spec for spec in TABLE if spec.per_link)


_PATTERNS = tuple((spec, *spec.name.split(JOINT if spec.per_joint else LINK))
                  for spec in PER_JOINT + PER_LINK)  # (spec, head, tail)


@functools.lru_cache(maxsize=4096)  # a parameter set checks every value (issue 45)
def spec_of(name: str) -> tuple[Spec, str | None]:
    """(Spec, joint or link or None) of a parameter name such as 'gains.elbow_joint.p' or
    'links.forearm_link.mass'; else KeyError."""
    if name in SPECS:
        return SPECS[name], None
    for spec, head, tail in _PATTERNS:
        if name.startswith(head) and name.endswith(tail) and len(name) > len(head + tail):
            return spec, name[len(head):len(name) - len(tail)]
    raise KeyError(name)


def joint_of_parameter(name: str) -> str | None:
    """The joint of a per-joint parameter name ('gains.<joint>.p' ...); None for the others."""
    try:
        spec, joint = spec_of(name)
    except KeyError:
        return None
    return joint if spec.per_joint else None


def link_of_parameter(name: str) -> str | None:
    """The link of a per-link parameter name ('links.<link>.mass' ...); None for the others."""
    try:
        spec, link = spec_of(name)
    except KeyError:
        return None
    return link if spec.per_link else None


def defaults() -> dict:
    """{name: default} of every global parameter (None: unset)."""
    return {spec.name: spec.default for spec in GLOBAL}


def per_joint_names(joint: str) -> list[str]:
    """The per-joint parameter names of one joint."""
    return [spec.name.replace(JOINT, joint) for spec in PER_JOINT]


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_error(spec, value):
    """Why `value` is not of `spec`'s kind, or None."""
    if spec.dynamic:
        return None  # its rule checks
    if spec.kind == 'bool':
        ok = isinstance(value, bool)
    elif spec.kind == 'int':
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif spec.kind == 'double':
        ok = _is_number(value) and math.isfinite(value)
    elif spec.kind == 'string':
        ok = isinstance(value, str)
    elif spec.kind == 'string_array':
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    else:
        ok = (isinstance(value, (list, tuple)) and len(value) == spec.size
              and all(_is_number(v) and math.isfinite(v) for v in value))
    if ok:
        return None
    noun = {'int': 'an integer', 'double': 'a finite number', 'bool': 'true or false',
            'string': 'a string', 'string_array': 'a list of strings',
            'double_array': f'{spec.size} finite numbers'}[spec.kind]
    return f'must be {noun}'


def _range_error(spec, value):
    """Why a number (or each element of an array) is out of range, or None."""
    items = value if spec.kind == 'double_array' else [value]
    for v in items:
        below = v < spec.low or (spec.low_exclusive and v == spec.low)
        if below or v > spec.high:
            return f'is out of range {spec.bounds_text()} {spec.unit}'.rstrip()
    return None


def check(name: str, value: object) -> object:
    """Check one value against the table (type, range, choices, rule); ParameterError if bad.

    None (unset) is accepted for parameters whose default is None. Returns the value.
    """
    try:
        spec, _ = spec_of(name)
    except KeyError:
        raise ParameterError(f'{name}: not a parameter of the controller') from None
    if value is None and spec.default is None:
        return value
    if isinstance(value, array.array):  # how rclpy hands over double arrays
        value = value.tolist()
    error = _type_error(spec, value)
    if error is None and spec.choices and value not in spec.choices:
        error = f'must be {spec.bounds_text()}'
    if error is None and spec.low is not None:
        error = _range_error(spec, value)
    if error is None and spec.rule is not None:
        error = spec.rule(value)
    if error is not None:
        raise ParameterError(f'{name} = {value!r}: {error}')
    return value


def _default_text(spec):
    if spec.default is None:
        return 'unset'
    if isinstance(spec.default, bool):
        return str(spec.default).lower()
    return f'{spec.default!r}' if isinstance(spec.default, str) else f'{spec.default}'


def render_markdown() -> str:
    """The README / docs parameter table, one row per parameter, as markdown."""
    lines = ['| parameter | type | default | unit | range | changes | description |',
             '|---|---|---|---|---|---|---|']
    for spec in TABLE:
        lines.append(f'| `{spec.name}` | {spec.kind} | `{_default_text(spec)}` | {spec.unit} | '
                     f'{spec.bounds_text()} | {spec.change} | {_cell(spec.description)} |')
    return '\n'.join(lines) + '\n'


def _cell(text):
    """`text` in a markdown table cell: a `|` (as in |qd|) escaped, else it splits the cell."""
    return text.replace('|', '\\|')


YAML_HEADER = """\
# rnea_controller parameters (rnea-controller --ros-args --params-file ...).
# Generated from rnea_controller/control/parameters.py (the one table of parameters):
#     python -m rnea_controller.control.parameters --yaml > config/controller.yaml
# Each comment: description [unit] (range; when it may change). A change is validated as a whole
# and applied between two ticks; a refused change says why. Per-joint parameters are shown
# commented out, for one joint.
/**:
  ros__parameters:
"""


def _comment(spec, indent):
    """The comment lines above one parameter in the YAML (wrapped at 99 columns)."""
    unit = f' [{spec.unit}]' if spec.unit else ''
    where = '; '.join(x for x in (spec.bounds_text(), f'changes: {spec.change}') if x)
    words = f'{spec.description}{unit} ({where}).'.split()
    lines, line = [], indent + '#'
    for word in words:
        if len(line) + 1 + len(word) > 99:
            lines.append(line)
            line = indent + '#'
        line += ' ' + word
    return lines + [line]


def _yaml_value(value):
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"' if value == '' else value
    if isinstance(value, list):
        return '[' + ', '.join(_yaml_value(v) for v in value) + ']'
    return repr(value)


def render_yaml(example_joint: str = 'shoulder_pan_joint') -> str:
    """config/controller.yaml: every parameter with its comment, from the table."""
    out = [YAML_HEADER.rstrip('\n')]
    for spec in TABLE:
        indent = '    '
        out += _comment(spec, indent)
        name = spec.name.replace(JOINT, example_joint).replace(LINK, 'forearm_link')
        if spec.default is None or spec.per_joint:
            example = spec.default if spec.default is not None else _example(spec)
            out.append(f'{indent}# {name}: {_yaml_value(example)}')
        else:
            out.append(f'{indent}{name}: {_yaml_value(spec.default)}')
    return '\n'.join(out) + '\n'


def _example(spec):
    return {'joints': ['shoulder_pan_joint', 'elbow_joint'], 'gains.<joint>.p': 400.0,
            'gains.<joint>.d': 40.0, 'effort_limits.<joint>': 100.0,
            'friction.<joint>.viscous': 0.0, 'friction.<joint>.coulomb': 0.0,
            'friction.<joint>.offset': 0.0, 'friction.<joint>.stribeck': 0.0,
            'contact.<joint>.threshold': 20.0,
            'links.<link>.mass': 2.275, 'links.<link>.com': [0.0, 0.0, 0.25],
            'links.<link>.inertia': [0.0312, 0.0, 0.0, 0.0312, 0.0, 0.004]}[spec.name]


if __name__ == '__main__':
    if '--yaml' in sys.argv[1:]:
        sys.stdout.write(render_yaml())
    else:
        sys.stdout.write(render_markdown())
