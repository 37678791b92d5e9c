"""The compiled law's two records (Pinocchio's Model/Data split): `LawModel`, the constant
arrays of a configuration, and `LawWork`, the preallocated rows, outputs and the adaptation's
state. Both the law (control/law.py) and the parts it composes (control/adaptation.py) use
them; this module imports neither, so imports run one way: law -> adaptation -> records.
"""
from numba import njit, types
from numba.experimental import structref

# the adaptation's state in LawWork (control/adaptation.py `work_shapes` gives their shapes)
ADAPTATION_FIELDS = ('theta', 'P', 'applied', 'qd_last', 'count', 'elapsed', 'integral',
                     'settled', 'q_mid', 'qd_mid', 'q_first', 'schedule', 'swing', 'calmed',
                     'probe', 'step', 'inertial', 'quiet')


class _Record(types.StructRef):
    """numba's type of a law record: a struct of the given fields (no literal types), passed
    to compiled code as one pointer (a namedtuple of 27 arrays took ~10 µs to pass)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


@structref.register
class _LawModelType(_Record):
    pass


@structref.register
class _LawWorkType(_Record):
    pass


class LawModel(structref.StructRefProxy):
    """The compiled law's constant inputs (Pinocchio's Model): the kernel's model arrays, the
    controlled joints' `index`, gains `kp`, `kd`, the feedback's extra inertia `boost`
    [kg·m²], `limits` [N·m], friction `viscous`, `coulomb`, `width`, two switches `pd`
    (feedforward_pd) and `compensate` (the robot compensates gravity), the estimator's
    forgetting factor `forget` (1: off), `floors`, `ceilings` and regressor `scales` (4, m),
    the integral's `ki` [1/s³] and `i_clamp` [N·m], `inertia` M_ii(q0) [kg·m²] (the step
    bound's; feedforward_pd's integral acts through it) and the period `dt` [s]. Made by
    `law_model`; read by compiled code only."""


class LawWork(structref.StructRefProxy):
    """The compiled law's workspace (Pinocchio's Data): RNEA rows Q, QD, QDD -> T;
    e = [e; ed]; raw: the law before limits; outputs tau, feedforward; the limiter's memory
    `previous`; per-joint `saturation` counts; `armature` (n,) the model's plus a^; then the
    adaptation's state (`adaptation.work_shapes`: estimates, covariances, window, integral,
    schedule). Holds the numpy arrays it was made from: Python reads those (`Controller`),
    compiled code writes them."""


LAW_MODEL_FIELDS = ('parents', 'prismatic', 'axes', 'R_tree', 'p_tree', 'I', 'armature', 'v0',
                    'a0', 'index', 'kp', 'kd', 'boost', 'limits', 'viscous', 'coulomb', 'width',
                    'offset', 'stribeck', 'stribeck_velocity', 'pd', 'compensate', 'forget',
                    'floors', 'ceilings', 'scales', 'ki', 'i_clamp', 'inertia', 'dt',
                    'velocity')
LAW_WORK_FIELDS = ('Q', 'QD', 'QDD', 'T', 'e', 'raw', 'previous', 'tau', 'feedforward',
                   'saturation', 'armature', 'bound', 'stepped', 'delay', 'history',
                   'kept') + ADAPTATION_FIELDS
structref.define_proxy(LawModel, _LawModelType, LAW_MODEL_FIELDS)
structref.define_proxy(LawWork, _LawWorkType, LAW_WORK_FIELDS)


@njit(cache=True)
def new_law_model(*fields: object) -> LawModel:
    return LawModel(*fields)  # compiled and cached here: the proxy's own constructor is not


@njit(cache=True)
def new_law_work(*fields: object) -> LawWork:
    return LawWork(*fields)
