"""A joint's friction torque: one function for the law's feedforward and the identification's
prediction (`analysis.identify` takes its columns from it), so the node feeds forward the
model that was identified.

    tau_f(qd) = b qd + c tanh(qd / w) + f0 + s tanh(qd / w) exp(-(qd / v_s)²)

b = friction.<joint>.viscous [N·m·s/rad], c = .coulomb [N·m], f0 = .offset [N·m] (a constant
torque: a sensor's bias, a cable's or a spring's pull; with the smoothed sign it is also the
asymmetric Coulomb friction, c₊ = c + f0 while qd > 0, c₋ = c - f0 while qd < 0), s =
.stribeck [N·m] (the static friction's excess over c, fading with speed), w =
friction_velocity_width [rad/s], v_s = friction_stribeck_velocity [rad/s]. Linear in
(b, c, f0, s) with w and v_s fixed: the Stribeck term is a linear surrogate of Gaz et al.'s
(RA-L 2019) shifted sigmoid φ1 / (1 + exp(-φ2 (qd + φ3))) - φ1 / (1 + exp(-φ2 φ3)), whose φ2
and φ3 enter nonlinearly, and of the exponential Stribeck curve (Armstrong-Hélouvry 1994).
"""
from numba import njit
import numpy as np

Value = float | np.ndarray  # a joint's figure, or an array of them
KINDS = ('viscous', 'coulomb', 'offset', 'stribeck')  # the parameters, in column order


@njit(cache=True)
def friction_torque(viscous: 'Value', coulomb: 'Value', offset: 'Value', stribeck: 'Value',
                    width: float, stribeck_velocity: float, qd: 'Value') -> 'Value':
    """tau_f [N·m] at velocity qd [rad/s] (a float or an array) of the module's model.

    >>> float(friction_torque(0.5, 2.0, 0.1, 0.0, 0.01, 0.1, 1.0))
    2.6
    """
    sign = np.tanh(qd / width)
    return (viscous * qd + coulomb * sign + offset
            + stribeck * sign * np.exp(-(qd / stribeck_velocity) ** 2))


def friction_columns(qd: 'Value', width: float, stribeck_velocity: float,
                     kinds: tuple = KINDS) -> np.ndarray:
    """(..., len(kinds)) the torque per unit of each of `kinds` (of KINDS; default all four,
    in KINDS' order) at qd [rad/s] (`friction_torque`'s)."""
    qd = np.asarray(qd, dtype=float)
    units = np.eye(len(KINDS))[[KINDS.index(kind) for kind in kinds]]
    return np.stack([friction_torque(*unit, width, stribeck_velocity, qd) * np.ones_like(qd)
                     for unit in units], axis=-1)
