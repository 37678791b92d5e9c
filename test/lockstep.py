"""A controller on the simulated arm in lockstep simulated time (in process, load-proof): the
closed loop shared by the in-process tests of test_geared and test_robustness."""
import numpy as np


def lockstep(plant, command, reference, steps, delay=0, lead=0.0, log=None, arrivals=None):
    """Run `command(q, qd, ref) -> tau` on `plant` (a sim.plant.Plant) for `steps` steps.

    arrivals: None (a state every step), or a numpy Generator: the states then come as they do
    to the node, not in lockstep with its ticks: a new state (the plant's, stamped with a
    jitter of up to ±0.2 ms) after one or two steps at random, the last one repeated between,
    and `command(q, qd, ref, state_dt)` gets state_dt [s]: the time between the stamps of the
    new state and the previous one, 0 for a repeat (`Controller.command`).

    At step k (t = k dt) the command is computed from the state then and the reference sampled
    at t + lead [s]; it acts `delay` steps later (the first command meanwhile). Returns
    (errors (steps, n): the reference at t + dt minus the position after the step [rad],
    fastest (n,): the largest |qd| per joint [rad/s]); stops early (rows left NaN) if the arm
    leaves the finite or exceeds 1000 rad/s. `log` gets (k, q, qd, applied effort) per step.
    """
    dt = plant.model.opt.timestep
    errors, fastest, pending = np.full((steps, plant.n), np.nan), np.zeros(plant.n), []
    held, stamp, q, qd = 0, None, None, None
    for k in range(steps):
        t = k * dt
        if arrivals is None:
            q, qd = plant.q, plant.qd
            tau = np.array(command(q, qd, reference.sample(t + lead)), dtype=float)
        else:
            state_dt = 0.0
            if q is None or held >= 2 or arrivals.random() < 0.5:
                new_stamp = t + arrivals.uniform(-2e-4, 2e-4)
                state_dt = dt if stamp is None else new_stamp - stamp
                q, qd, stamp, held = plant.q, plant.qd, new_stamp, 0
            held += 1
            tau = np.array(command(q, qd, reference.sample(t + lead), state_dt), dtype=float)
        pending = pending + [tau] if pending else [tau] * (delay + 1)
        applied = plant.step(pending.pop(0))
        if log is not None:
            log.append((k, q, qd, applied.copy()))
        q_after, qd_after = plant.q, plant.qd
        errors[k] = reference.sample(t + dt)[0] - q_after
        fastest = np.maximum(fastest, np.abs(qd_after))
        if not np.isfinite(q_after).all() or fastest.max() > 1000.0:
            break
    return errors, fastest
