"""Identification of a payload, joint friction and rotor inertia from a run: least squares.

The residual of the model, r = tau_meas - RNEA(q, qd, qdd), is explained by

    r = Y_m m + Y_h h + Y_I I_O(m, h) + Σ_j (b_j qd_j + fc_j tanh(qd_j / w) + a_j qdd_j) e_j

- m [kg], h = m c [kg·m]: the payload's mass and first moment on link `link`, c its centre of
  mass in the link frame [m]. RNEA is linear in the inertial parameters, so the regressor
  column of a parameter is exact: RNEA on the model with a unit of that parameter added to the
  link (gravity on) minus RNEA on the model (Atkeson, An & Hollerbach 1986).
- The payload is a point mass: its inertia about its centre of mass is neglected, so its
  inertia about the link origin is I_O = m [c×][c×]ᵀ = [h×][h×]ᵀ / m. That term is carried
  from the previous estimate (a fixed point: a few solves of the same normal equations).
- b_j [N·m·s/rad] viscous and fc_j [N·m] Coulomb friction of joint j, with the smoothing of the
  node's friction feedforward: tanh(qd / w), w = `friction_velocity_width` [rad/s].
- a_j [kg·m²] the rotor inertia (armature) of joint j (issue 23): its column is qdd_j on row j,
  exactly as RNEA adds it. Told nothing, a geared joint's torque is mostly a_j qdd_j.

qd, qdd and tau are filtered by `smoothing.Smoother` (zero-phase Savitzky-Golay, decimated).
Only the rows of joints sliding at `SLIDING_SPEED` or faster enter the fit: slower, friction is
stiction and the transition between its two signs, whose shape is the plant's (MuJoCo's soft
frictionloss, a real gear's Stribeck curve), not fc·tanh(qd / w). On the geared simulated arm
(issue 23) the fit with every row read Coulomb 0.93-0.96 N·m for 1 and viscous 10.1 for 10,
and the controller told them tracked 2.7× worse than told the true values; with the sliding
rows alone, 0.997-1.000 and 9.99, and the same tracking as told (1.17e-4 against 1.18e-4 rad).
A payload is therefore identified from motion, not from an arm held still.
Memory is bounded: only AᵀA, Aᵀb, bᵀb and the row count are accumulated.

A parameter is "not identifiable from this motion" when
- its column is not excited: a joint's friction needs its filtered velocity to have an RMS of
  `MIN_SPEED` and tanh(qd / w) an RMS of `MIN_TANH` (the joint moved, both ways, faster than
  w most of the time), not sensor noise around zero; its armature an RMS acceleration of
  `MIN_ACCELERATION`; a payload column must not be zero;
- it lies in a direction the motion does not excite: a singular value of the column-scaled
  regressor below `MIN_SINGULAR` of the largest (the fit's condition number at most 100);
- or its standard error exceeds `MAX_RELATIVE_STD` of its estimate. A parameter whose true
  value is 0 may land here; it is then left out of the parameters file, and the node's
  default applies. A negative mass, friction coefficient or armature is not physical and left
  out likewise.
- The centre of mass c = h / m is a derived quantity: a few grams of fitted mass (noise, or an
  unmodelled effect) turn a small h into metres. The payload is left out whole when a
  component of c is farther than `MAX_COM_DISTANCE` or its standard error exceeds
  `MAX_RELATIVE_STD` of it (at least `COM_TOLERANCE`).
The parameters file holds only values the node accepts (`parameters_yaml` checks each against
the parameter table, and the whole against the model with `validate_parameters`).
Standard errors: σ² diag((AᵀA)⁻¹), σ² = SSE / (rows - parameters); the com's by the delta
method from those of m and h.
"""
from dataclasses import replace

import numpy as np
import yaml

from rnea_controller.analysis.smoothing import Smoother
from rnea_controller.control import parameters
from rnea_controller.control.law import default_joints, validate_parameters
from rnea_controller.control.parameters import joint_of_parameter
from rnea_controller.dynamics import spatial
from rnea_controller.dynamics.rnea import rnea
from rnea_controller.errors import ModelError, ParameterError

PAYLOAD = ('mass', 'h_x', 'h_y', 'h_z')
INERTIA = ('I_xx', 'I_xy', 'I_xz', 'I_yy', 'I_yz', 'I_zz')
MIN_SINGULAR = 1e-2
MIN_SPEED = 0.05  # [rad/s] RMS of a joint's velocity to fit its viscous friction
MIN_TANH = 0.5  # RMS of tanh(qd / w) to fit its Coulomb friction
MIN_ACCELERATION = 0.5  # [rad/s²] RMS of a joint's acceleration to fit its armature
SLIDING_SPEED = 0.1  # [rad/s] a joint's rows enter the fit only while it moves this fast
MAX_RELATIVE_STD = 0.5  # an estimate's standard error at most this share of it
MAX_COM_DISTANCE = 1.0  # [m] beyond, a "point mass" is noise: its inertia is not carried
COM_TOLERANCE = 0.01  # [m] standard error of a com component always accepted
NEGATIVE = 'negative, not physical'
UNCERTAIN = 'standard error larger than half the estimate'
DEFAULT_WIDTH = 0.01  # [rad/s], the node's default friction_velocity_width


def unit_inertias():
    """The 10 spatial inertias (link frame) of a unit of m, h_x..h_z, I_xx..I_zz.

    I = [[m 1, -[h×]], [[h×], I_O]] (as `spatial.spatial_inertia`, with h = m c).
    """
    units = []
    for k in range(10):
        theta = np.zeros(10)
        theta[k] = 1.0
        units.append(_inertia(theta))
    return units


def _inertia(theta):
    """Spatial inertia of the parameters (m, h, I_xx, I_xy, I_xz, I_yy, I_yz, I_zz)."""
    m, h, (xx, xy, xz, yy, yz, zz) = theta[0], theta[1:4], theta[4:]
    I = np.zeros((6, 6))
    I[:3, :3] = m * np.eye(3)
    I[:3, 3:] = -spatial.skew(h)
    I[3:, :3] = spatial.skew(h)
    I[3:, 3:] = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
    return I


def point_mass_inertia(m, h):
    """(I_xx, I_xy, I_xz, I_yy, I_yz, I_zz) about the link origin of a point mass m at h / m.

    Zero when m ≤ 0 or the com is farther than MAX_COM_DISTANCE (an estimate from noise).
    """
    if m <= 0 or np.linalg.norm(h) > MAX_COM_DISTANCE * m:
        return np.zeros(6)
    I = spatial.skew(h) @ spatial.skew(h).T / m
    return I[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]


class PayloadRegressor:
    """Y (N, n, 10): dtau/dθ for the 10 inertial parameters θ of a payload on `link`."""

    def __init__(self, model, link):
        body, R, p = model.link_frame(link)
        if body < 0:
            raise ModelError(f"link '{link}' is part of the fixed base: a payload there loads "
                             'no joint')
        self.model = model
        self.unit_models = []
        for unit in unit_inertias():
            inertias = np.array(model.inertias)
            inertias[body] += spatial.transform_inertia(unit, R, p)
            inertias.setflags(write=False)
            self.unit_models.append(replace(model, inertias=inertias))

    def __call__(self, q, qd, qdd):
        """(RNEA of the model (N, n), Y (N, n, 10)) at the states (N, n)."""
        tau = rnea(self.model, q, qd, qdd)
        Y = np.stack([rnea(m, q, qd, qdd) - tau for m in self.unit_models], axis=-1)
        return tau, Y


class Identification:
    """Normal equations of the payload and friction fit, accumulated over a run.

    model: RobotModel (joint arrays in model order); link: the payload's link;
    width: friction_velocity_width [rad/s].
    """

    def __init__(self, model, link, width=DEFAULT_WIDTH, window_s=0.02):
        self.model, self.link, self.width = model, link, width
        self.regressor = PayloadRegressor(model, link)
        self.smoother = Smoother(window_s)
        p = 10 + 3 * model.n
        self.G = np.zeros((p, p))
        self.g = np.zeros(p)
        self.bb = 0.0
        self.samples = 0
        self.rows = 0

    @property
    def names(self):
        """Parameter names, in the column order of the normal equations."""
        friction = [f'{j}.{kind}' for j in self.model.joint_names for kind in ('viscous',
                                                                               'coulomb')]
        return (list(PAYLOAD + INERTIA) + friction
                + [f'{j}.armature' for j in self.model.joint_names])

    def update(self, stamps, q, qd, tau):
        """Feed joint states (model order): stamps [ns], q [rad], qd [rad/s], tau [N·m]."""
        out = self.smoother.update(stamps, q, qd, tau)
        if out is None or not len(out[0]):
            return
        _, q, qd, qdd, tau = out
        tau_model, Y = self.regressor(q, qd, qdd)
        N, n = q.shape
        joint = np.zeros((N, n, 3 * n))  # friction (viscous, Coulomb) then armature columns
        joint[:, np.arange(n), 2 * np.arange(n)] = qd
        joint[:, np.arange(n), 2 * np.arange(n) + 1] = np.tanh(qd / self.width)
        joint[:, np.arange(n), 2 * n + np.arange(n)] = qdd
        # rows (sample, joint) in the fit: sliding, no velocity reversal in the filter window
        sliding = (np.abs(qd) >= SLIDING_SPEED) & self.smoother.steady
        A = np.concatenate([Y, joint], axis=2)[sliding]
        b = (tau - tau_model)[sliding]
        self.G += A.T @ A
        self.g += A.T @ b
        self.bb += float(b @ b)
        self.samples += N
        self.rows += int(sliding.sum())

    def result(self):
        """The fit: see `solve`."""
        return solve(self.G, self.g, self.bb, self.samples, self.model, self.link, self.names,
                     self.width, self.rows)


def _column_floor(p):
    """Least RMS of each column over the samples for it to count as excited."""
    n = (p - 10) // 3
    floor = np.full(p, 1e-9)
    floor[10:10 + 2 * n:2] = MIN_SPEED
    floor[11:10 + 2 * n:2] = MIN_TANH
    floor[10 + 2 * n:] = MIN_ACCELERATION
    return floor


def _excited(G, candidates, samples):
    """Indices of `candidates` the motion excites: columns above their floor, then, while the
    scaled Gram matrix has a singular value below MIN_SINGULAR × the largest, the parameter
    with the largest share of that direction is dropped. Returns (kept, condition number)."""
    rms = np.sqrt(np.diag(G) / max(samples, 1))
    kept = [i for i in candidates if rms[i] >= _column_floor(len(G))[i]]
    while kept:
        d = np.sqrt(np.diag(G)[kept])
        C = G[np.ix_(kept, kept)] / np.outer(d, d)
        values, vectors = np.linalg.eigh(C)
        singular = np.sqrt(np.maximum(values, 0.0))
        if singular[0] >= MIN_SINGULAR * singular[-1]:
            return kept, float(singular[-1] / singular[0])
        kept.pop(int(np.argmax(np.abs(vectors[:, 0]))))
    return kept, float('nan')


def _fixed_point(G, g, kept, iterations=50):
    """θ (10 + 2n) with the kept parameters fitted and I_O that of the fitted point mass."""
    theta = np.zeros(len(g))
    inertia = slice(4, 10)
    for _ in range(iterations):
        rhs = g[kept] - G[np.ix_(kept, range(4, 10))] @ theta[inertia]
        x = np.linalg.solve(G[np.ix_(kept, kept)], rhs)
        previous, theta[kept] = theta.copy(), x
        theta[inertia] = point_mass_inertia(theta[0], theta[1:4]) if 0 in kept else 0.0
        if np.allclose(theta, previous, rtol=1e-12, atol=1e-15):
            break
    if not np.isfinite(theta).all():  # no fixed point: the plain fit, I_O = 0
        theta = np.zeros(len(g))
        theta[kept] = np.linalg.solve(G[np.ix_(kept, kept)], g[kept])
    return theta


def solve(G, g, bb, samples, model, link, names, width, rows=None):
    """Least-squares estimates, standard errors and identifiability from normal equations of
    `rows` rows (default: every joint of every sample).

    Returns a dict: samples, rows, condition_number, residual_rms_before / _after [N·m],
    parameters {name: {estimate, std_error, identifiable, reason}}, and the payload
    {link, mass, com, mass_std, com_std} and friction {joint: {viscous, coulomb}} with None
    for what is not identifiable.
    """
    rows = samples * model.n if rows is None else rows
    candidates = [0, 1, 2, 3] + list(range(10, len(g)))
    kept, cond = (_excited(G, candidates, rows / model.n) if rows > len(candidates)
                  else ([], float('nan')))
    theta = _fixed_point(G, g, kept) if kept else np.zeros(len(g))
    sse = max(bb - 2 * theta @ g + theta @ G @ theta, 0.0)
    dof = max(rows - len(kept), 1)
    cov = np.zeros((len(g), len(g)))
    if kept:
        cov[np.ix_(kept, kept)] = sse / dof * np.linalg.inv(G[np.ix_(kept, kept)])
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    positive = [0] + list(range(10, len(g)))  # mass, friction coefficients, armature
    params = {}
    for i in candidates:
        reason = ('not excited by this motion' if i not in kept else
                  UNCERTAIN if std[i] > MAX_RELATIVE_STD * abs(theta[i]) else
                  NEGATIVE if theta[i] < 0 and i in positive else None)
        params[names[i]] = {'estimate': float(theta[i]) if i in kept else None,
                            'std_error': float(std[i]) if i in kept else None,
                            'identifiable': reason is None, 'reason': reason}
    return {'link': link, 'friction_velocity_width': width, 'samples': samples, 'rows': rows,
            'condition_number': cond,
            'residual_rms_before': float(np.sqrt(bb / max(rows, 1))),
            'residual_rms_after': float(np.sqrt(sse / max(rows, 1))),
            'parameters': params, 'payload': _payload(theta, cov, params, link),
            'friction': _friction(params, model), 'armature': _armature(params, model)}


def _payload(theta, cov, params, link):
    """Mass [kg] and com c = h / m [m] with standard errors (delta method), or None."""
    out = {'link': link, 'mass': None, 'mass_std': None, 'com': None, 'com_std': None}
    if not params['mass']['identifiable'] or theta[0] <= 0:
        return out
    m, h = theta[0], theta[1:4]
    out['mass'], out['mass_std'] = float(m), params['mass']['std_error']
    J = np.hstack([-h[:, None] / m ** 2, np.eye(3) / m])  # dc / d(m, h)
    com_std = np.sqrt(np.maximum(np.diag(J @ cov[:4, :4] @ J.T), 0.0))
    com = h / m
    ok = [params[f'h_{a}']['identifiable'] for a in 'xyz']
    out['com'] = [float(c) if k else None for c, k in zip(com, ok)]
    out['com_std'] = [float(s) if k else None for s, k in zip(com_std, ok)]
    ill = [f'{a} {c:.3g} ± {s:.2g} m' for a, c, s, k in zip('xyz', com, com_std, ok)
           if k and (abs(c) > MAX_COM_DISTANCE
                     or s > max(MAX_RELATIVE_STD * abs(c), COM_TOLERANCE))]
    if ill:  # c = h / m of a mass too small for its h: the whole payload is noise
        reason = f'centre of mass ill-conditioned ({", ".join(ill)} for {m:.3g} kg)'
        params['mass'].update(identifiable=False, reason=reason)
        return {**out, 'mass': None, 'mass_std': None, 'com': None, 'com_std': None}
    return out


def _armature(params, model):
    """{joint: armature [kg·m²] or None}."""
    return {joint: params[f'{joint}.armature']['estimate']
            if params[f'{joint}.armature']['identifiable'] else None
            for joint in model.joint_names}


def _friction(params, model):
    out = {}
    for joint in model.joint_names:
        out[joint] = {kind: params[f'{joint}.{kind}']['estimate']
                      if params[f'{joint}.{kind}']['identifiable'] else None
                      for kind in ('viscous', 'coulomb')}
    return out


def parameters_yaml(result, model=None, joints=None):
    """The identified parameters as a ROS 2 parameters file for the node (`--params-file`).

    Only identifiable values are written; a com component that is not is written as 0 (the
    node's default) and said so in a comment. Per-joint values are written for the controlled
    `joints` only (the run's: its reference's names; None: the node's default joints), as the
    node refuses a per-joint parameter of a joint it does not control (a gripper's finger).
    Each value is checked against the parameter table, and with `model` (the RobotModel
    fitted) the whole against `validate_parameters` with those joints (the payload is left out
    if that refuses it): the node always starts with the file.
    """
    missing = [name for name, p in result['parameters'].items() if not p['identifiable']]
    entries, refused = _accepted(_entries(result), model, joints)
    lines = ['# Identified by rnea-validate --identify (linear least squares on the RNEA',
             f"# residual, {result['samples']} samples, condition number "
             f"{result['condition_number']:.3g}). Not identifiable from this motion:"]
    lines += [f'#   {name}' for name in missing] or ['#   (none)']
    lines += [f'# Left out, the node would refuse it: {text}' for text in refused]
    params = {}
    for path, value in entries:
        node = params
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    body = yaml.safe_dump({'/**': {'ros__parameters': params}}, sort_keys=False,
                          default_flow_style=None)
    return '\n'.join(lines) + '\n' + body


def _entries(result):
    """[(parameter path, value)] of every identified value, rounded to 6 decimals."""
    entries = []
    payload = result['payload']
    if payload['mass'] is not None:
        entries += [(('payload', 'link'), payload['link']),
                    (('payload', 'mass'), round(payload['mass'], 6)),
                    (('payload', 'com'), [round(c, 6) if c is not None else 0.0
                                          for c in payload['com']])]
    for joint, friction in result['friction'].items():
        entries += [(('friction', joint, kind), round(value, 6))
                    for kind, value in friction.items() if value is not None]
    if any(path[0] == 'friction' for path, _ in entries):
        entries.append((('friction_velocity_width',), result['friction_velocity_width']))
    entries += [(('armature', joint), round(value, 6))
                for joint, value in result.get('armature', {}).items() if value is not None]
    return entries


def _accepted(entries, model, joints=None):
    """(the entries the node accepts, the reasons of those it would refuse)."""
    kept, refused = [], []
    if joints is None and model is not None:
        joints = default_joints(model)
    for path, value in entries:
        name = '.'.join(path)
        joint = joint_of_parameter(name)
        if joints is not None and joint is not None and joint not in joints:
            refused.append(f'{name}: {joint!r} is not a controlled joint of this run')
            continue
        try:
            kept.append((path, parameters.check(name, value)))
        except ParameterError as error:
            refused.append(str(error))
    if model is None:
        return kept, refused
    values = {'.'.join(path): value for path, value in kept}
    try:
        validate_parameters({**values, 'joints': list(joints)}, model)
    except ParameterError as error:
        refused.append(f'the payload: {error}')
        kept = [(path, value) for path, value in kept if path[0] != 'payload']
    return kept, refused
