"""The loop in time with the state stream (issue 12), against the MuJoCo simulator, side by side.

    .venv/bin/python bench/bench_timing.py [--duration 6] [--streams 1khz 500hz+jitter positions]

For each state stream of the simulator (`rnea-sim`: 1 kHz; 500 Hz with 0.3 ms publication
jitter; 1 kHz positions only, no velocities) and each of phase lock off/on x latency
compensation off/on, in one run: the controller (`rnea-controller`, computed torque, exact
model) tracks the demo motion (`rnea-send-trajectory --demo`) for `duration` seconds while this
process records the joint states and the reference (raw subscriptions, deserialized by rclpy
afterwards). Printed per case:
- effective delay: the lag tau minimising the RMS over all joints of q(t) - q_ref(t - tau)
  (q_ref interpolated at the states' stamps, tau searched over -5..+10 ms by 0.02 ms);
- RMS: the worst joint's RMS of q(t) - q_ref(t) [mrad] (what the validator reports), and
  the same once shifted by the effective delay;
- CPU: the controller process's CPU [% of one core] during the motion (/proc/<pid>/stat);
- missed ticks and the loop rate during the motion (controller's /diagnostics, references).
Figures from a shared 2-core machine are noisy: compare the cases of one run with each other.
"""
import argparse
import os
from pathlib import Path
import sys
import tempfile
import threading
import time

import numpy as np
import processes
from processes import stop

os.environ.setdefault('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

VENV_BIN = Path(sys.executable).parent
STREAMS = {  # name: simulator parameters
    '1khz': [],
    '500hz+jitter': ['publish_rate:=500.0', 'publish_jitter:=0.0003'],
    'positions': ['publish_velocity:=false'],
}
CASES = [(False, 'off'), (False, 'auto'), (True, 'off'), (True, 'auto')]  # (phase lock, comp.)
TAUS = np.arange(-5e-3, 10e-3 + 1e-9, 2e-5)


def stamp_of(msg):
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def effective_delay(t_ref, q_ref, t, q):
    """(tau [s], RMS over all joints at tau [rad], per-joint RMS at 0 [rad], at tau [rad]):
    the lag minimising the RMS of q(t) - q_ref(t - tau), q_ref linearly interpolated."""
    def errors(tau):
        inside = (t - tau >= t_ref[0]) & (t - tau <= t_ref[-1])
        shifted = np.column_stack([np.interp(t[inside] - tau, t_ref, q_ref[:, j])
                                   for j in range(q.shape[1])])
        return q[inside] - shifted
    rms = [np.sqrt(np.mean(errors(tau) ** 2)) for tau in TAUS]
    best = TAUS[int(np.argmin(rms))]
    per_joint = np.sqrt(np.mean(errors(0.0) ** 2, axis=0))
    shifted = np.sqrt(np.mean(errors(best) ** 2, axis=0))
    return best, min(rms), per_joint, shifted


class Recorder:
    """Raw subscriptions to joint_states and ~/reference, diagnostics typed; one thread."""

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('bench_timing', context=self.context)
        self.states, self.references, self.diagnostics = [], [], []
        self.recording = False
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, '/joint_states', self._keep(self.states), qos,
                                      raw=True)
        self.node.create_subscription(JointState, '/rnea_controller/reference',
                                      self._keep(self.references), qos, raw=True)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._diagnostic, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _keep(self, store):
        def keep(data):
            if self.recording:
                store.append(data)
            self.seen = True
        return keep

    def _diagnostic(self, msg):
        for status in msg.status:
            if status.name == 'rnea_controller: control loop':
                self.diagnostics.append({kv.key: kv.value for kv in status.values})

    def start(self):
        self.states.clear()
        self.references.clear()
        self.diagnostics.clear()
        self.recording = True

    def stop(self):
        """Stop recording; returns (state stamps, q, reference stamps, q_ref) as arrays."""
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import JointState
        self.recording = False
        states = [deserialize_message(d, JointState) for d in list(self.states)]
        refs = [deserialize_message(d, JointState) for d in list(self.references)]
        t = np.array([stamp_of(m) for m in states])
        t_ref = np.array([stamp_of(m) for m in refs])
        q = np.array([m.position for m in states])
        q_ref = np.array([m.position for m in refs])
        order = np.argsort(t_ref)
        return t, q, t_ref[order], q_ref[order]

    def close(self):
        self.executor.shutdown(timeout_sec=1.0)
        self.thread.join(2.0)  # before the context goes (else std::terminate at exit)
        self.node.destroy_node()
        import rclpy
        rclpy.shutdown(context=self.context)


def start(args, log_dir, name):
    return processes.start(args, open(Path(log_dir) / f'{name}.log', 'w'))


def cpu_seconds(pid):
    """utime + stime of a process [s]."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def run_case(recorder, log_dir, name, phase_lock, compensation, duration):
    """One controller run on the running simulator; returns the figures."""
    controller = start([str(VENV_BIN / 'rnea-controller'), '--realtime-priority', '0',
                        '--ros-args', '-p', f'phase_lock:={str(phase_lock).lower()}', '-p',
                        f"latency_compensation:='{compensation}'"], log_dir, f'{name}-controller')
    try:
        recorder.start()
        started = wait_until(lambda: len(recorder.references) > 500 or
                             controller.poll() is not None, 120.0)
        if not started or controller.poll() is not None:
            raise RuntimeError(f'{name}: the controller did not start (see {log_dir})')
        sender = start([str(VENV_BIN / 'rnea-send-trajectory'), '--demo', '--duration',
                        str(duration)], log_dir, f'{name}-sender')
        recorder.start()  # the motion starts when the sender has sent it, and exits
        if sender.wait(120) != 0:
            raise RuntimeError(f'{name}: the sender failed (see {log_dir})')
        cpu0, wall0 = cpu_seconds(controller.pid), time.monotonic()
        time.sleep(duration + 0.5)
        cpu = (cpu_seconds(controller.pid) - cpu0) / (time.monotonic() - wall0)
        diagnostics = list(recorder.diagnostics)
        t, q, t_ref, q_ref = recorder.stop()
    finally:
        stop(controller)
    missed = (int(diagnostics[-1]['missed ticks']) - int(diagnostics[0]['missed ticks'])
              if len(diagnostics) > 1 else -1)
    latency = diagnostics[-1].get('latency [ms]', '?') if diagnostics else '?'
    moving = np.flatnonzero(np.any(np.abs(np.diff(q_ref, axis=0)) > 1e-9, axis=1))
    if len(moving) < 100:
        raise RuntimeError(f'{name}: the reference did not move (see {log_dir})')
    window = (t >= t_ref[moving[0]]) & (t <= t_ref[moving[-1]])
    tau, _, per_joint, shifted = effective_delay(t_ref, q_ref, t[window], q[window])
    rate = (len(t_ref) - 1) / (t_ref[-1] - t_ref[0])
    return dict(tau=tau, rms=per_joint.max(), shifted=shifted.max(), cpu=cpu, missed=missed,
                rate=rate, latency=latency)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=6.0, help='motion per case [s]')
    parser.add_argument('--streams', nargs='+', default=list(STREAMS), choices=list(STREAMS))
    options = parser.parse_args(argv)
    log_dir = tempfile.mkdtemp(prefix='bench_timing_')
    recorder = Recorder()
    print(f'bench_timing: {len(options.streams) * len(CASES)} runs of {options.duration:g} s '
          f'motion; logs in {log_dir}')
    print(f'{"stream":14} {"lock":5} {"comp":5} {"delay ms":>9} {"RMS mrad":>9} '
          f'{"shifted":>8} {"L ms":>6} {"CPU %":>6} {"missed":>6} {"rate Hz":>8}')
    try:
        for stream in options.streams:
            for phase_lock, compensation in CASES:
                name = f'{stream}-{"lock" if phase_lock else "free"}-{compensation}'
                # a simulator of its own for each case, at rest at HOME: between two
                # controllers the arm has no feedback, and under the last command it was
                # given it ran away (three cases failed on a trajectory from beyond a limit)
                sim = start([str(VENV_BIN / 'rnea-sim'), '--ros-args',
                             *[a for p in STREAMS[stream] for a in ('-p', p)]], log_dir,
                            f'{name}-sim')
                try:
                    r = run_case(recorder, log_dir, name, phase_lock, compensation,
                                 options.duration)
                except RuntimeError as error:  # one failed case: say so, run the others
                    print(f'{stream:14} {"on" if phase_lock else "off":5} '
                          f'{compensation:5} failed: {error}', flush=True)
                    continue
                finally:
                    stop(sim)
                print(f'{stream:14} {"on" if phase_lock else "off":5} {compensation:5} '
                      f'{r["tau"] * 1e3:9.2f} {r["rms"] * 1e3:9.3f} '
                      f'{r["shifted"] * 1e3:8.3f} {r["latency"]:>6} {r["cpu"] * 100:6.1f} '
                      f'{r["missed"]:6d} {r["rate"]:8.1f}', flush=True)
    finally:
        recorder.close()


if __name__ == '__main__':
    main()
