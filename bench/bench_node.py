"""Benchmark of the controller node at 1 kHz on a 7-joint arm, next to a bare rclpy timer.

    .venv/bin/python bench/bench_node.py [--duration 30] [--runs events+rt45 events+cpu1 ...]

For each run, side by side: the controller node (subprocess `rnea-controller --executor X`) on the
Panda of example-robot-data with its fingers locked (7 joints), a separate feeder process
publishing its joint states at 1 kHz, a bare rclpy node with a 1 kHz timer and the same executor
(the peer), and a bare rclpy node with the controller's own I/O (the joint states in, a command and
a reference out at 1 kHz, typed, as a user would write it; issue 45: the controller's CPU at or
under it, 'CPU ratio node / bare same-I/O node'; the same per tick, the two rates apart on a loaded
host; and the loop threads' own, where the node's Python runs). A run is `events` or `single` (the
executor), optionally `+rtN`: node and peers alike with SCHED_FIFO priority N, and `+cpuK`: node
and peers alike bound to CPU core K (the node's --cpu-affinity). Printed per run: achieved loop
rate, missed ticks, tick compute time p99, CPU % of one core (from /proc/<pid>/stat), lost
joint-state messages (in the measured window: the feeder's stamps against the node's count; those
lost before the node's reader had matched the feeder, during discovery, are shown apart), period
jitter p99 and its ratio to the bare timer's; and the tick compute p50/p99 measured in-process.
Per-second figures come from the node's /diagnostics (and the same computation in the bare timer);
a run's figure is the median over its seconds, with the worst second alongside.
First, in this process: the node's message paths (`wire`: bytes written and read in place)
side by side with rclpy's typed publish and deserialization of the same messages.
"""
import argparse
import json
import os
from pathlib import Path
import sys
import sysconfig
import tempfile
import time

import numpy as np
from processes import start, stop

os.environ.setdefault('ROS_DOMAIN_ID', str(10 + os.getpid() % 80))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

ROBOTS = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data/robots'
PANDA = ROBOTS / 'panda_description/urdf/panda.urdf'
PANDA_JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
PANDA_HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
SWAY = 1e-4  # [rad] the feeder's positions about PANDA_HOME (1 rad/s)
PERIOD = 1e-3
VENV_BIN = Path(sys.executable).parent
LAST_CPU = max(os.sched_getaffinity(0))
DEFAULT_RUNS = ['events+rt45', f'events+cpu{LAST_CPU}', 'events', 'single']


def locked_panda_urdf(directory):
    """Panda URDF with the finger joints made fixed (locked at 0): a 7-joint arm."""
    text = PANDA.read_text()
    for finger in ('panda_finger_joint1', 'panda_finger_joint2'):
        start = text.index(f'<joint name="{finger}"')
        end = text.index('>', start)
        text = text[:start] + text[start:end].replace('"prismatic"', '"fixed"') + text[end:]
    path = Path(directory) / 'panda_locked.urdf'
    path.write_text(text)
    return path


def make_executor(kind):
    import rclpy.executors
    if kind == 'events':
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    return rclpy.executors.SingleThreadedExecutor()


def spin_for(executor, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)


def per_second_stats(starts, period):
    """Per whole second of tick start times [s]: (rate [Hz], jitter p99 [µs]) arrays."""
    starts = np.asarray(starts)
    seconds = np.floor(starts - starts[0]).astype(int)
    rates, jitters = [], []
    for s in range(seconds[-1]):
        t = starts[seconds == s]
        periods = np.diff(t)
        rates.append(len(periods) / periods.sum())
        jitters.append(np.percentile(np.abs(periods - period), 99) * 1e6)
    return np.array(rates), np.array(jitters)


def parse_label(label):
    """'events+rt50+cpu1' -> ('events', '50', '1'); priority '0' and cpu '' when absent."""
    executor, *options = label.split('+')
    priority = next((o[2:] for o in options if o.startswith('rt')), '0')
    cpu = next((o[3:] for o in options if o.startswith('cpu')), '')
    return executor, priority, cpu


def bare_timer(duration, executor_kind, priority, cpu):
    """Peer: an rclpy node whose 1 kHz timer only records its start time; prints JSON stats."""
    import rclpy

    from rnea_controller.ros.realtime import set_cpu_affinity, set_realtime_priority
    if cpu:
        set_cpu_affinity([int(cpu)])
    rclpy.init()
    node = rclpy.create_node('bench_bare_timer')
    if priority:  # as the controller: the loop thread only, once DDS is up
        set_realtime_priority(priority)
    starts = np.zeros(int(duration / PERIOD) * 2 + 1000)
    count = [0]

    def tick():
        starts[count[0] % len(starts)] = time.perf_counter()
        count[0] += 1
    node.create_timer(PERIOD, tick)
    executor = make_executor(executor_kind)
    executor.add_node(node)
    cpu0, t0 = cpu_seconds(os.getpid()), time.perf_counter()
    spin_for(executor, duration)
    cpu = (cpu_seconds(os.getpid()) - cpu0) / (time.perf_counter() - t0) * 100
    starts = starts[:count[0]]
    rates, jitters = per_second_stats(starts, PERIOD)
    missed = np.sum(np.maximum(np.round(np.diff(starts) / PERIOD) - 1, 0))
    print(json.dumps({'rate': float(np.median(rates)), 'jitter_p99': jitters.tolist(),
                      'cpu': cpu, 'missed %': 100.0 * missed / (len(starts) + missed)}),
          flush=True)


def bare_io(duration, executor_kind, priority, cpu):
    """Peer: a bare rclpy node with the controller's own I/O, as a user would write it: the
    joint states in (typed), and at 1 kHz the command (Float64MultiArray) and the reference
    (JointState, stamped) out, typed, made from the newest state; prints its CPU as JSON."""
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from rnea_controller.ros.realtime import set_cpu_affinity, set_realtime_priority
    if cpu:
        set_cpu_affinity([int(cpu)])
    rclpy.init()
    node = rclpy.create_node('bench_bare_io')
    if priority:
        set_realtime_priority(priority)
    newest = [JointState(name=PANDA_JOINTS, position=PANDA_HOME, velocity=[0.0] * 7)]
    node.create_subscription(JointState, '/joint_states',
                             lambda msg: newest.__setitem__(0, msg), 10)
    commands = node.create_publisher(Float64MultiArray, '~/commands', 10)
    references = node.create_publisher(JointState, '~/reference', 10)
    command, reference = Float64MultiArray(), JointState(name=PANDA_JOINTS)

    ticks = [0]

    def tick():
        ticks[0] += 1
        state = newest[0]
        command.data = state.position
        reference.header.stamp = node.get_clock().now().to_msg()
        reference.position, reference.velocity = state.position, state.velocity
        reference.effort = state.position
        commands.publish(command)
        references.publish(reference)
    node.create_timer(PERIOD, tick)
    executor = make_executor(executor_kind)
    executor.add_node(node)
    cpu0, t0 = cpu_seconds(os.getpid()), time.perf_counter()
    loop0 = time.thread_time()  # this thread spins: the node's callbacks run on it
    spin_for(executor, duration)
    elapsed = time.perf_counter() - t0
    cpu = (cpu_seconds(os.getpid()) - cpu0) / elapsed * 100
    loop = (time.thread_time() - loop0) / elapsed * 100
    print(json.dumps({'cpu': cpu, 'loop cpu': loop, 'rate': ticks[0] / elapsed}), flush=True)


def feeder(duration):
    """Publishes the Panda's joint states at 1 kHz once the controller subscribes; prints the
    count and every message's stamp [ns] (system time, as the node's diagnostics stamps)."""
    import rclpy
    from sensor_msgs.msg import JointState
    rclpy.init()
    node = rclpy.create_node('bench_feeder')
    publisher = node.create_publisher(JointState, '/joint_states', 10)
    msg = JointState(name=PANDA_JOINTS, position=PANDA_HOME, velocity=[0.0] * 7)
    sent = []

    def publish():
        if len(sent) < duration / PERIOD:
            t = time.perf_counter()
            # an encoder's noise, not a motion: a stream repeating its state is frozen to the
            # node, and a 10 mrad swing the arm makes against its hold reads as a contact
            # (its integral gathers it: 'holding: contact' within 1-4 s, stop 62)
            msg.position = [q + SWAY * np.sin(t) for q in PANDA_HOME]
            now = node.get_clock().now()
            msg.header.stamp = now.to_msg()
            publisher.publish(msg)
            sent.append(now.nanoseconds)
    executor = make_executor('events')
    executor.add_node(node)
    while publisher.get_subscription_count() == 0:
        spin_for(executor, 0.05)
    node.create_timer(PERIOD, publish)
    spin_for(executor, duration + 1.0)
    print(json.dumps({'sent': len(sent), 'stamps': sent}), flush=True)


def cpu_seconds(pid, thread=None):
    """utime + stime of a process [s], from /proc/<pid>/stat (of its thread `thread`, from
    /proc/<pid>/task/<thread>/stat, if given: the main thread's id is the pid)."""
    path = f'/proc/{pid}/stat' if thread is None else f'/proc/{pid}/task/{thread}/stat'
    fields = Path(path).read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class Observer:
    """Collects the controller's per-second /diagnostics."""

    def __init__(self):
        from diagnostic_msgs.msg import DiagnosticArray
        import rclpy
        rclpy.init()
        self.node = rclpy.create_node('bench_observer')
        self.seconds = []
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self.on_diagnostics, 10)
        self.executor = make_executor('single')
        self.executor.add_node(self.node)

    def on_diagnostics(self, msg):
        for status in msg.status:
            if status.name == 'rnea_controller: control loop':
                values = {kv.key: kv.value for kv in status.values}
                values['stamp'] = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
                self.seconds.append(values)

    def spin(self, seconds):
        spin_for(self.executor, seconds)

    def close(self):
        import rclpy
        self.node.destroy_node()
        rclpy.shutdown()


def run(label, duration, urdf, observer, tmp):
    """One side-by-side run; returns the figures of the controller and of the bare timer."""
    executor, priority, cpu = parse_label(label)
    affinity = ['--cpu-affinity', cpu] if cpu else []
    me = [sys.executable, __file__]
    logs = {name: open(Path(tmp) / f'{name}-{label}.log', 'w+')
            for name in ('controller', 'feeder', 'bare', 'bare_io')}
    controller = start([str(VENV_BIN / 'rnea-controller'), '--executor', executor, '--urdf',
                        str(urdf), '--realtime-priority', priority, '--force-realtime',
                        *affinity],
                       logs['controller'])
    procs = [controller]
    try:
        observer.seconds.clear()
        while not any(s.get('mode') == 'waiting for joint states' for s in observer.seconds):
            observer.spin(0.2)
            if controller.poll() is not None:
                raise RuntimeError(Path(logs['controller'].name).read_text())
        procs.append(start(me + ['--feeder', str(duration + 3)], logs['feeder']))
        while not observer.seconds or not observer.seconds[-1].get('mode', '').startswith('hold'):
            observer.spin(0.1)
        observer.spin(1.0)  # one full second of control before measuring
        peer = ['--executor', executor, '--priority', priority, '--cpu', cpu]
        procs.append(start(me + ['--bare-timer', str(duration), *peer], logs['bare']))
        procs.append(start(me + ['--bare-io', str(duration), *peer], logs['bare_io']))
        observer.seconds.clear()
        cpu0, t0 = cpu_seconds(controller.pid), time.perf_counter()
        loop0 = cpu_seconds(controller.pid, controller.pid)  # the loop's: the main thread
        observer.spin(duration)
        elapsed = time.perf_counter() - t0
        cpu = (cpu_seconds(controller.pid) - cpu0) / elapsed * 100
        loop = (cpu_seconds(controller.pid, controller.pid) - loop0) / elapsed * 100
        measured = list(observer.seconds)
        for proc in procs[1:]:
            proc.wait(duration + 30)
        observer.spin(2.2)  # the feeder has stopped: the next diagnostics count every state
        received = int(observer.seconds[-1]['joint states received'])
    finally:
        for proc in procs:
            stop(proc)
    outputs = {name: Path(log.name).read_text() for name, log in logs.items()}
    bare = json.loads(outputs['bare'].strip().splitlines()[-1])
    io = json.loads(outputs['bare_io'].strip().splitlines()[-1])
    bare['io cpu'], bare['io rate'], bare['io loop cpu'] = io['cpu'], io['rate'], io['loop cpu']
    feeder = json.loads(outputs['feeder'].strip().splitlines()[-1])
    return summarise(measured, (cpu, loop), feeder, received, bare)


def lost_in_window(seconds, stamps, lost_in_run):
    """(sent, lost) joint states between the first and the last diagnostics of the window.

    Sent: the feeder's messages stamped in (t_a - T/2, t_b - T/2], t_a and t_b being the two
    diagnostics' stamps (half a period earlier: a message is counted on arrival, ~0.1 ms after
    it is stamped); lost = sent - the node's 'joint states received' between them, kept within
    [0, lost_in_run]: a message later than T/2 at an edge of the window is counted on the wrong
    side of it (seen once as 1 lost in the window and -1 before it, with none lost in the run).
    """
    stamps = np.asarray(stamps)
    a, b = seconds[0], seconds[-1]
    half = PERIOD / 2 * 1e9
    sent = int(np.sum((stamps > a['stamp'] - half) & (stamps <= b['stamp'] - half)))
    lost = sent - (int(b['joint states received']) - int(a['joint states received']))
    return sent, min(max(lost, 0), lost_in_run)


def summarise(seconds, cpu, feeder, received, bare):
    """The run's figures; cpu: (process, loop thread) [% of a core]."""
    cpu, loop = cpu
    seconds = seconds[1:]  # the first report covers time before the window started
    lost_in_run = feeder['sent'] - received  # exact: the node's final count, feeder stopped
    sent, lost = lost_in_window(seconds, feeder['stamps'], lost_in_run)
    column = {key: np.array([float(s[key]) for s in seconds])
              for key in ('loop rate [Hz]', 'period jitter p99 [us]', 'tick compute p99 [us]',
                          'tick compute p50 [us]', 'ticks', 'missed ticks')}
    ticks = column['ticks'][-1] - column['ticks'][0]
    missed = column['missed ticks'][-1] - column['missed ticks'][0]
    # a status published between two seconds (a fault's, the command delay's) covers too few
    # ticks for figures: NaN, left out
    jitter = float(np.nanmedian(column['period jitter p99 [us]']))
    bare_jitter = float(np.median(bare['jitter_p99']))
    rate = float(np.nanmedian(column['loop rate [Hz]']))
    return {
        'rate': rate,
        'missed %': 100.0 * missed / max(ticks + missed, 1),
        'compute p50': float(np.nanmedian(column['tick compute p50 [us]'])),
        'compute p99 median': float(np.nanmedian(column['tick compute p99 [us]'])),
        'compute p99 worst': float(np.nanmax(column['tick compute p99 [us]'])),
        'cpu %': cpu, 'sent': sent, 'lost': lost,
        'lost at start-up': lost_in_run - lost,
        'jitter p99': jitter,
        'jitter p99 worst': float(np.nanmax(column['period jitter p99 [us]'])),
        'bare jitter p99': bare_jitter, 'bare rate': bare['rate'], 'bare cpu %': bare['cpu'],
        'bare missed %': bare['missed %'],
        'jitter ratio': jitter / bare_jitter,
        'bare io cpu %': bare['io cpu'], 'cpu ratio io': cpu / bare['io cpu'],
        'bare io rate': bare['io rate'],
        # on a loaded host the two keep different rates: the CPU of a tick, and the loop's
        'cpu ratio io per tick': (cpu / rate) / (bare['io cpu'] / bare['io rate']),
        'loop cpu %': loop, 'bare io loop cpu %': bare['io loop cpu'],
        'loop cpu ratio io per tick': (loop / rate) / (bare['io loop cpu'] / bare['io rate']),
    }


def compute_p50(urdf):
    """Tick compute p50 [µs]: the node's own tick, in-process, fed a fixed fresh state."""
    import rclpy
    from rclpy.parameter import Parameter

    from rnea_controller.ros.node import ControllerNode
    rclpy.init()
    node = ControllerNode(parameter_overrides=[
        Parameter('robot_description', value=Path(urdf).read_text()),
        Parameter('state_timeout', value=1.0)])
    node.autostart()
    node.state.q[:] = PANDA_HOME
    node.state.valid = True
    times = []
    for _ in range(5000):
        node.state.time = time.perf_counter()
        t = time.perf_counter()
        node._tick()
        times.append(time.perf_counter() - t)
    node.finish()  # as the program ends: the action server's and the intake's threads stop
    node.release_helpers()
    node.destroy_node()
    rclpy.shutdown()
    return np.percentile(times, 50) * 1e6, np.percentile(times, 99) * 1e6


def report(results, p50):
    print(f'\ncontroller node, 7-joint Panda (fingers locked), 1 kHz; tick compute in-process: '
          f'p50 {p50[0]:.1f} µs, p99 {p50[1]:.1f} µs')
    rows = [('achieved rate [Hz]', 'rate', '{:.1f}', '>= 999'),
            ('missed ticks [%]', 'missed %', '{:.3f}', '<= 0.1'),
            ('tick compute p50 [µs]', 'compute p50', '{:.1f}', ''),
            ('tick compute p99 [µs] (median s)', 'compute p99 median', '{:.1f}', '<= 100'),
            ('tick compute p99 [µs] (worst s)', 'compute p99 worst', '{:.1f}', ''),
            ('CPU [% of a core]', 'cpu %', '{:.1f}', '<= 35'),
            ('joint states sent (window)', 'sent', '{:d}', ''),
            ('joint states lost (window)', 'lost', '{:d}', '0'),
            ('  lost before it (discovery)', 'lost at start-up', '{:d}', ''),
            ('period jitter p99 [µs] (median s)', 'jitter p99', '{:.1f}', ''),
            ('period jitter p99 [µs] (worst s)', 'jitter p99 worst', '{:.1f}', ''),
            ('bare timer: jitter p99 [µs]', 'bare jitter p99', '{:.1f}', ''),
            ('bare timer: rate [Hz]', 'bare rate', '{:.1f}', ''),
            ('bare timer: missed ticks [%]', 'bare missed %', '{:.3f}', ''),
            ('bare timer: CPU [% of a core]', 'bare cpu %', '{:.1f}', ''),
            ('jitter ratio node / bare', 'jitter ratio', '{:.2f}', '<= 1.2'),
            ('bare same-I/O node: rate [Hz]', 'bare io rate', '{:.1f}', ''),
            ('bare same-I/O node: CPU [% of a core]', 'bare io cpu %', '{:.1f}', ''),
            ('CPU ratio node / bare same-I/O node', 'cpu ratio io', '{:.2f}', '<= 1.0'),
            ('  the same per tick (rates differ)', 'cpu ratio io per tick', '{:.2f}', ''),
            ('loop thread: CPU [% of a core]', 'loop cpu %', '{:.1f}', ''),
            ('bare same-I/O node: loop thread [%]', 'bare io loop cpu %', '{:.1f}', ''),
            ('loop thread CPU ratio per tick', 'loop cpu ratio io per tick', '{:.2f}', '')]
    kinds = list(results)
    print(f'{"":36s}' + ''.join(f'{k:>14s}' for k in kinds) + f'{"target":>10s}')
    for label, key, fmt, target in rows:
        print(f'{label:36s}' + ''.join(f'{fmt.format(results[k][key]):>14s}' for k in kinds)
              + f'{target:>10s}')


def message_paths():
    """[µs] best of 7 x 2000, side by side: rclpy's typed publish of the command and the
    reference against the node's in-place bytes (`wire.Writer`), and a joint state taken by
    rclpy's deserialization + `take` against the node's in-place read (`take_serialized`)."""
    import array

    import rclpy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from rnea_controller import wire
    from rnea_controller.ros.inputs import JointStateInput
    from rnea_controller.ros.outputs import command_writer, joint_state_writer
    rclpy.init()
    node = rclpy.create_node('bench_message_paths')
    command_pub = node.create_publisher(Float64MultiArray, '~/command', 10)
    reference_pub = node.create_publisher(JointState, '~/reference', 10)
    store = wire.default_typestore()
    command, reference = command_writer(store, 7), joint_state_writer(store, PANDA_JOINTS)
    typed_command = Float64MultiArray(data=array.array('d', bytes(56)))
    zeros = array.array('d', bytes(56))
    typed_reference = JointState(name=PANDA_JOINTS, position=zeros, velocity=zeros,
                                 effort=zeros)
    state = JointStateInput(PANDA_JOINTS, velocity_limits=np.full(7, 2.0))  # as the node: gated
    raw = reference.raw()  # a JointState of the 7 joints, as the wire carries it

    def typed_take():
        state.take(deserialize_message(raw, JointState))

    cases = {'publish command: typed': lambda: command_pub.publish(typed_command),
             'publish command: in place': lambda: command_pub.publish(command.raw()),
             'publish reference: typed': lambda: reference_pub.publish(typed_reference),
             'publish reference: in place': lambda: (reference.set_stamp(1),
                                                     reference_pub.publish(reference.raw())),
             'joint state: deserialize + take': typed_take,
             'joint state: in place': lambda: state.take_serialized(raw)}
    best = dict.fromkeys(cases, float('inf'))
    for _ in range(7):  # interleaved, so that a slow spell of the host hits every case
        for name, case in cases.items():
            t = time.perf_counter()
            for _ in range(2000):
                case()
            best[name] = min(best[name], (time.perf_counter() - t) / 2000 * 1e6)
    node.destroy_node()
    rclpy.shutdown()
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=30.0, help='[s] per executor')
    parser.add_argument('--runs', nargs='+', default=DEFAULT_RUNS,
                        help='executor (events, single), +rtN: node and bare timer with '
                             'SCHED_FIFO priority N, +cpuK: both bound to core K (default: '
                             f'{" ".join(DEFAULT_RUNS)})')
    parser.add_argument('--executor', default='events', help=argparse.SUPPRESS)
    parser.add_argument('--priority', type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument('--cpu', default='', help=argparse.SUPPRESS)
    parser.add_argument('--bare-timer', type=float, help=argparse.SUPPRESS)
    parser.add_argument('--feeder', type=float, help=argparse.SUPPRESS)
    parser.add_argument('--bare-io', type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_timer:
        return bare_timer(args.bare_timer, args.executor, args.priority, args.cpu)
    if args.feeder:
        return feeder(args.feeder)
    if args.bare_io:
        return bare_io(args.bare_io, args.executor, args.priority, args.cpu)
    with tempfile.TemporaryDirectory() as tmp:
        urdf = locked_panda_urdf(tmp)
        paths = message_paths()
        print('\nmessage paths, 7 joints, best of 7 x 2000 [µs]:')
        for name, us in paths.items():
            print(f'  {name:36s}{us:7.1f}')
        p50 = compute_p50(urdf)
        observer = Observer()
        try:
            results = {label: run(label, args.duration, urdf, observer, tmp)
                       for label in args.runs}
        finally:
            observer.close()
    report(results, p50)


if __name__ == '__main__':
    main()
