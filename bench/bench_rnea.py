"""RNEA speed, side by side with Pinocchio in the same process (`./run bench rnea`).

For UR5 (6 joints) and Panda (7 joints, fingers locked), on the same random states:
- single call: our `rnea`, our readable `rnea_reference`, and `pinocchio.rnea` from Python;
- batched over N = 10,000 states: our `rnea` on (N, n) arrays against a Python loop over
  `pinocchio.rnea`.
- the controller's law tick (`Controller.command`, one compiled call: RNEA rows, friction,
  limits, the online estimate, the integral) with rotor inertia (`armature.<joint>`, issue 23)
  off and on at one fixed state, and with the states moving (a new velocity every tick), the
  online estimate and integral of issue 29 on (the defaults) against both off (the law of
  issue 23) on the same moving states; repeats interleaved;
- the tick with contact detection (the defaults' law plus `ContactObserver.commanded` and
  `.update` on each new state, as ros/loop.py calls them: one more RNEA row) against the law
  alone on the same moving states.
Times are the best of several repeats (timeit's advice: on a shared, noisy machine the minimum
is the figure least disturbed by other load); the ratios compare runs made moments apart in one
process, so they hold even when the absolute figures move. Targets (issue 2): Panda single
≤ 20 µs; batched ≤ 1 µs per sample and faster than the loop over Pinocchio.
"""
from pathlib import Path
import sysconfig
import time

import numpy as np
import pinocchio as pin

from rnea_controller import rnea, rnea_reference, RobotModel
from rnea_controller.control.contact import ContactObserver
from rnea_controller.control.law import Controller, validate_parameters

ROBOTS = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data/robots'
ARMS = {
    'UR5': ('ur_description/urdf/ur5_robot.urdf', []),
    'Panda': ('panda_description/urdf/panda.urdf', ['panda_finger_joint1', 'panda_finger_joint2']),
}
N_BATCH = 10_000
ESTIMATING = {}  # issue 29: the defaults (the online estimate and the integral on)


def per_call_us(function, calls, repeats=7):
    """Best over `repeats` of the mean time per call [µs] over `calls` calls."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times)


def pinocchio_model(path, locked):
    model = pin.buildModelFromUrdf(str(path))
    if locked:
        model = pin.buildReducedModel(model, [model.getJointId(j) for j in locked],
                                      pin.neutral(model))
    return model


def bench_arm(name, relative, locked):
    path = ROBOTS / relative
    model = RobotModel.from_urdf_file(path, locked_joints=locked)
    oracle = pinocchio_model(path, locked)
    data = oracle.createData()
    assert oracle.nq == oracle.nv == model.n, 'these arms have no continuous joints'
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-2, 2, size=(3, model.n))
    Q, QD, QDD = rng.uniform(-2, 2, size=(3, N_BATCH, model.n))
    err = np.max(np.abs(rnea(model, q, qd, qdd) - pin.rnea(oracle, data, q, qd, qdd)))

    ours = per_call_us(lambda: rnea(model, q, qd, qdd), 20_000)
    reference = per_call_us(lambda: rnea_reference(model, q, qd, qdd), 300)
    pinocchio = per_call_us(lambda: pin.rnea(oracle, data, q, qd, qdd), 20_000)
    batch = per_call_us(lambda: rnea(model, Q, QD, QDD), 3, repeats=5) / N_BATCH

    def pin_loop():
        for k in range(N_BATCH):
            pin.rnea(oracle, data, Q[k], QD[k], QDD[k])

    loop = per_call_us(pin_loop, 1, repeats=3) / N_BATCH
    return dict(name=name, n=model.n, err=err, ours=ours, reference=reference,
                pinocchio=pinocchio, batch=batch, loop=loop)


def law_tick_us(model, values, calls=20_000, moving=False):
    """A function timing `calls` law ticks (the node's tick passes the same arrays, new values
    in place): at one fixed state, or `moving` (a new velocity every tick): mean µs per tick."""
    cfg = validate_parameters(values, model)
    controller = Controller(cfg)
    rng = np.random.default_rng(1)
    q, qd = rng.uniform(-1, 1, (2, model.n))
    ref = np.vstack([q + 0.01, qd, np.zeros(model.n)])
    step = np.array([1e-6, -1e-6])
    if not moving:
        return lambda: per_call_us(lambda: controller.command(cfg, q, qd, ref), calls,
                                   repeats=1)

    def tick():
        step[0] = -step[0]
        qd[0] += step[0]
        return controller.command(cfg, q, qd, ref)
    return lambda: per_call_us(tick, calls, repeats=1)


def contact_tick_us(model, calls=20_000):
    """As law_tick_us(moving=True) with the defaults, plus the contact observer on every
    tick's new state (the loop's work per tick with contact detection)."""
    cfg = validate_parameters({}, model)
    controller, observer = Controller(cfg), ContactObserver(cfg)
    rng = np.random.default_rng(1)
    q, qd = rng.uniform(-1, 1, (2, model.n))
    ref = np.vstack([q + 0.01, qd, np.zeros(model.n)])
    step = np.array([1e-6, -1e-6])

    def tick():
        step[0] = -step[0]
        qd[0] += step[0]
        observer.update(q, qd, 1e-3)
        observer.commanded(controller.command(cfg, q, qd, ref))
    return lambda: per_call_us(tick, calls, repeats=1)


def bench_law(name, relative, locked, rounds=7):
    """Law tick [µs] with armature off and on: best of `rounds` interleaved repeats."""
    model = RobotModel.from_urdf_file(ROBOTS / relative, locked_joints=locked)
    geared = {f'armature.{j}': 0.1 for j in model.joint_names}
    issue23 = {'estimation.forgetting_time': 0.0, 'integral_gain': 0.0}
    runs = dict(off=law_tick_us(model, {}), on=law_tick_us(model, geared),
                moving=law_tick_us(model, ESTIMATING, moving=True),
                issue23=law_tick_us(model, issue23, moving=True),
                contact=contact_tick_us(model))
    times = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            times[key].append(run())
    return dict(name=name, **{key: min(values) for key, values in times.items()})


def main():
    rows = [bench_arm(name, *spec) for name, spec in ARMS.items()]
    laws = [bench_law(name, *spec) for name, spec in ARMS.items()]
    print('\nRNEA, single call [µs per call] (best of 7 repeats)')
    print(f'{"arm":<7}{"n":>3}{"rnea":>10}{"reference":>12}{"pinocchio":>11}'
          f'{"rnea/pin":>10}{"ref/rnea":>10}{"max |Δτ| vs pin":>18}')
    for r in rows:
        print(f'{r["name"]:<7}{r["n"]:>3}{r["ours"]:>10.2f}{r["reference"]:>12.1f}'
              f'{r["pinocchio"]:>11.2f}{r["ours"] / r["pinocchio"]:>10.1f}'
              f'{r["reference"] / r["ours"]:>10.0f}{r["err"]:>18.1e}')
    print(f'\nRNEA, batched over N = {N_BATCH:,} states [µs per sample]')
    print(f'{"arm":<7}{"rnea (N, n)":>13}{"loop over pin.rnea":>20}{"loop/rnea":>11}')
    for r in rows:
        ratio = r['loop'] / r['batch']
        print(f'{r["name"]:<7}{r["batch"]:>13.3f}{r["loop"]:>20.3f}{ratio:>11.1f}')
    print('\nlaw tick (Controller.command) [µs per tick], best of 7 interleaved repeats: at '
          'one fixed state, rotor inertia off / on (armature.<joint> 0.1 kg·m²); states '
          'moving, the online estimate on (the defaults) / off (the law of issue 23)')
    print(f'{"arm":<7}{"off":>8}{"on":>8}{"on/off":>8}{"moving":>9}{"issue 23":>10}'
          f'{"ratio":>7}')
    for r in laws:
        print(f'{r["name"]:<7}{r["off"]:>8.2f}{r["on"]:>8.2f}{r["on"] / r["off"]:>8.2f}'
              f'{r["moving"]:>9.2f}{r["issue23"]:>10.2f}{r["moving"] / r["issue23"]:>7.2f}')
    print('\ncontact detection [µs per tick], best of 7 interleaved repeats, states moving: the '
          'law alone (defaults) / the law and the contact observer (the loop calls both)')
    print(f'{"arm":<7}{"law":>8}{"+ observer":>12}{"ratio":>7}{"observer":>10}')
    for r in laws:
        print(f'{r["name"]:<7}{r["issue23"]:>8.2f}{r["contact"]:>12.2f}'
              f'{r["contact"] / r["issue23"]:>7.2f}{r["contact"] - r["issue23"]:>10.2f}')
    panda = rows[-1]
    verdicts = [('Panda single call ≤ 20 µs', panda['ours'] <= 20.0),
                ('batched ≤ 1 µs per sample', all(r['batch'] <= 1.0 for r in rows)),
                ('batched faster than a loop over pinocchio.rnea',
                 all(r['batch'] < r['loop'] for r in rows))]
    print()
    for text, ok in verdicts:
        print(f'  [{"met" if ok else "MISSED"}] {text}')


if __name__ == '__main__':
    main()
