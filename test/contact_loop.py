"""The node's loop in process, in lockstep simulated time: the ROS-free parts the node holds
(`Modes`, `ContactObserver`, `Controller`) on a MuJoCo plant, as ros/loop.py calls them, for
the contact tests (test_contact.py).

Each step k (t = k dt): the mode (`Modes.step`, a new state every step); the observer on the
new state (the commands published since the previous one), a contact -> `Modes.touched` and
the integral cleared; the law towards the mode's reference sampled one step ahead; the command
acts `delay` steps later (one tick of delay as in test_robustness). A `stall` (first step,
steps) is a simulator starved on a busy host: meanwhile it publishes no state and applies the
last command it received; the loop ticks on its last state and publishes commands nobody
applies (the newest acts once the stall ends).
"""
from dataclasses import dataclass, field

import numpy as np

from rnea_controller.control import modes
from rnea_controller.control.contact import ContactObserver
from rnea_controller.control.law import Controller


@dataclass
class Run:
    """What a run shows, per step: the residual (steps, m) [N·m], the applied effort (steps,
    m), the contact force [N] (steps,), the mode (steps,), positions (steps, n), the
    observer's threshold (steps, m) [N·m], the true external torque (steps, m) [N·m]
    (MuJoCo's constraint forces on the joints: the contacts'); the step of the first contact
    detected (None)."""

    residual: np.ndarray
    applied: np.ndarray
    force: np.ndarray
    mode: list
    q: np.ndarray
    threshold: np.ndarray
    external: np.ndarray
    detected: int | None = None
    log: list = field(default_factory=list)


def run(plant, cfg, trajectory, steps, delay=1, start=None, later=None, stall=None):
    """The loop on `plant` (reset to `start` or its state) tracking `trajectory` (a core
    Trajectory, trajectory time = simulated time) for `steps` steps; returns a Run. later:
    (step, make(t, q_d) -> Trajectory): a new trajectory then, from the desired position;
    stall: (first step, steps) the simulator stalls (module doc)."""
    dt = plant.model.opt.timestep
    controller, observer = Controller(cfg), ContactObserver(cfg)
    t_now = [0.0]
    log = []
    machine = modes.Modes(cfg.joints, cfg.index, cfg.model.velocity_limits[cfg.index],
                          clock=lambda: t_now[0], log=lambda level, text: log.append(text))
    if start is not None:
        plant.reset(start)
    m = len(cfg.joints)
    out = Run(np.zeros((steps, m)), np.zeros((steps, m)), np.zeros(steps), [],
              np.zeros((steps, plant.n)), np.zeros((steps, m)), np.zeros((steps, m)), log=log)
    pending, seen, last = [], None, None  # seen: (q, qd, step) of the newest state published
    held = np.zeros(plant.n)  # the command the plant applies (a stall from step 0: none)
    for k in range(steps):
        t = t_now[0] = k * dt
        stalled = stall is not None and stall[0] <= k < stall[0] + stall[1]
        if not stalled:
            seen = (plant.q, plant.qd, k)
        q, qd, k_seen = seen
        command = machine.step(cfg, t, k_seen * dt, q, qd)
        if k == 0:
            machine.trajectory = trajectory  # as the intake swaps a trajectory in
        if later is not None and k == later[0]:
            machine.trajectory = later[1](t, machine.trajectory.sample(t)[0])
        if command is modes.LAW:
            worst = -1 if stalled else observer.update(
                q, qd, (k - last) * dt if last is not None else dt,
                controller.estimates if cfg.forget < 1.0 else None)
            if worst >= 0 and machine.touched(cfg, q, cfg.joints[worst],
                                              float(observer.residual[worst]),
                                              observer.threshold[worst]):
                controller.reset()
                out.detected = k if out.detected is None else out.detected
            controller.adapting = machine.mode is not modes.CONTACT
            tau = controller.command(cfg, q, qd, machine.trajectory.sample(t + dt))
            machine.commanded(cfg, t, machine.trajectory.is_holding(t + dt),
                              controller.failing_since)
            observer.commanded(tau)
        else:
            tau = controller.brake(cfg, q, qd) if command is modes.BRAKE else np.zeros(m)
            observer.reset()
        last = k_seen
        full = np.zeros(plant.n)
        full[cfg.index] = tau
        if stalled:  # the last command received acts; the newest waits in the queue
            pending = [full] * delay
        else:
            pending = pending + [full] if pending else [full] * (delay + 1)
            held = pending.pop(0)
        out.applied[k] = plant.step(held)[cfg.index]
        out.residual[k] = observer.residual
        out.threshold[k] = observer.threshold
        out.external[k] = plant.data.qfrc_constraint[cfg.index]
        out.force[k] = plant.contact_force()
        out.mode.append(machine.mode)
        out.q[k] = plant.q
        if not np.all(np.isfinite(plant.q)):
            break
    return out
