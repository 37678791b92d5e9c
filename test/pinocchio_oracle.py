"""Pinocchio as the independent oracle: the same URDF, its own parser and algorithms.

Maps our joint vectors (model order, one angle per continuous joint) to Pinocchio's
configuration (continuous joints as (cos θ, sin θ)) and back. Tests only; never at runtime.
"""
import numpy as np
import pinocchio as pin


class Oracle:
    """Pinocchio model of a URDF file, indexed like a `RobotModel` of the same file."""

    def __init__(self, urdf_path, model, locked_joints=(), free_flyer=False):
        root = pin.JointModelFreeFlyer() if free_flyer else None
        full = (pin.buildModelFromUrdf(str(urdf_path), root) if root is not None
                else pin.buildModelFromUrdf(str(urdf_path)))
        if locked_joints:
            ids = [full.getJointId(name) for name in locked_joints]
            full = pin.buildReducedModel(full, ids, pin.neutral(full))
        self.pin = full
        self.data = full.createData()
        self.free_flyer = free_flyer
        ids = [full.getJointId(name) for name in model.joint_names]
        assert all(i < full.njoints for i in ids), 'a joint of our model is unknown to Pinocchio'
        self.idx_q = [full.idx_qs[i] for i in ids]
        self.nq = [full.nqs[i] for i in ids]
        self.idx_v = [full.idx_vs[i] for i in ids]

    def q(self, q):
        """Pinocchio configuration for our joint positions q (n,)."""
        out = pin.neutral(self.pin)
        for value, start, size in zip(q, self.idx_q, self.nq):
            out[start:start + size] = (np.cos(value), np.sin(value)) if size == 2 else value
        return out

    def v(self, x, base=None):
        """Pinocchio velocity-space vector for our (n,) vector x (and a 6-vector base motion)."""
        out = np.zeros(self.pin.nv)
        out[self.idx_v] = x
        if base is not None:
            out[:6] = base
        return out

    def ours(self, x):
        """Our (n,) vector from a Pinocchio velocity-space vector."""
        return np.asarray(x)[self.idx_v]

    def rnea(self, q, qd, qdd, fext=None, base_velocity=None, base_acceleration=None):
        tau = pin.rnea(self.pin, self.data, self.q(q), self.v(qd, base_velocity),
                       self.v(qdd, base_acceleration), *([fext] if fext is not None else []))
        return self.ours(tau)

    def mass_matrix(self, q):
        M = pin.crba(self.pin, self.data, self.q(q))
        M = np.triu(M) + np.triu(M, 1).T
        return M[np.ix_(self.idx_v, self.idx_v)]

    def gravity(self, q):
        return self.ours(pin.computeGeneralizedGravity(self.pin, self.data, self.q(q)))

    def potential_energy(self, q):
        return pin.computePotentialEnergy(self.pin, self.data, self.q(q))

    def link_wrenches(self, wrenches):
        """Pinocchio's per-joint external forces for {link name: [f; m] in the link frame}."""
        fext = [pin.Force.Zero() for _ in range(self.pin.njoints)]
        for link, wrench in wrenches.items():
            frame = self.pin.frames[self.pin.getFrameId(link)]
            force = pin.Force(np.asarray(wrench[:3]), np.asarray(wrench[3:]))
            fext[frame.parentJoint] += frame.placement.act(force)
        return fext
