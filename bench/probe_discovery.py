"""DDS discovery of a new subscriber beside a running 1 kHz publisher, bare rclpy (issue 35).

    .venv/bin/python bench/probe_discovery.py [--trials 20] [--sub-env K=V ...]
        [--pub-env K=V ...] [--sub-qos best_effort|reliable] [--pub-qos reliable|best_effort]

A publisher process (JointState on /joint_states at 1 kHz, the simulator's QoS by default) is
started first; then `--trials` fresh subscriber processes, one after the other, each printing
seconds from the start of its rclpy.init to: the participant made (`node`), the subscription
made (`sub`), the publisher seen in the ROS graph (`graph`: count_publishers > 0, i.e. the
publisher's endpoint discovered, SEDP), the subscription's matched event (`matched`), the
first message (`msg`). `--sub-env`/`--pub-env` set the environment of one side only (a Fast
DDS profile file, FASTDDS_BUILTIN_TRANSPORTS...). Printed: every trial, then per column the
sorted values, the count over 1 s, and the load average before and after.
"""
import argparse
import json
import os
from pathlib import Path
import subprocess
import sys
import time

TIMEOUT = 8.0  # [s] one subscriber's wait for its first message


def _qos(name):
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    policy = {'reliable': ReliabilityPolicy.RELIABLE,
              'best_effort': ReliabilityPolicy.BEST_EFFORT}[name]
    return QoSProfile(depth=10, reliability=policy)


def publisher(qos):
    """JointState at 1 kHz until Ctrl-C (a timer in rclpy, as the simulator)."""
    import rclpy
    from rclpy.event_handler import PublisherEventCallbacks
    from sensor_msgs.msg import JointState
    rclpy.init()
    node = rclpy.create_node('probe_publisher')

    def matched(info):
        print(f'pub matched {time.time():.3f} count {info.current_count}', flush=True)
    pub = node.create_publisher(JointState, '/joint_states', _qos(qos),
                                event_callbacks=PublisherEventCallbacks(matched=matched))
    msg = JointState(name=['a', 'b'], position=[0.0, 0.0], velocity=[0.0, 0.0])
    node.create_timer(0.001, lambda: pub.publish(msg))
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass


def _all_threads_other():
    for tid in os.listdir('/proc/self/task'):
        os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))


def subscriber(qos, fifo, delay=0.0, extra=0, burn=0.0):
    """One trial: its times [s] from the start of rclpy.init, as a JSON line."""
    t0 = time.monotonic()
    import rclpy
    from rclpy.event_handler import SubscriptionEventCallbacks
    from sensor_msgs.msg import JointState
    times = {}

    def mark(name):
        times.setdefault(name, round(time.monotonic() - t0, 3))
    rclpy.init()
    mark('init')
    if fifo:  # SCHED_FIFO while the participant is made (then every thread back to normal)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo))
    node = rclpy.create_node('probe_subscriber')
    if fifo:
        _all_threads_other()
    mark('node')
    while time.monotonic() - t0 < times['node'] + burn:  # busy, as the controller's imports
        sum(range(1000))
    while time.monotonic() - t0 < times['node'] + delay:  # the subscription made later, as
        rclpy.spin_once(node, timeout_sec=0.005)  # the controller's at configure
        if 'graph' not in times and node.count_publishers('/joint_states'):
            mark('graph')
    mark('sub0')
    from std_msgs.msg import String
    for k in range(extra):  # other endpoints first, as the controller's services and topics
        node.create_publisher(String, f'probe_extra_{k}', 10)
        node.create_subscription(String, f'probe_extra_in_{k}', lambda _: None, 10)
    node.create_subscription(
        JointState, '/joint_states', lambda _: mark('msg'), _qos(qos),
        event_callbacks=SubscriptionEventCallbacks(matched=lambda _: mark('matched')))
    mark('sub')
    while 'msg' not in times and time.monotonic() - t0 < TIMEOUT:
        rclpy.spin_once(node, timeout_sec=0.005)
        if 'graph' not in times and node.count_publishers('/joint_states'):
            mark('graph')
    times['wall'] = time.time()
    print(json.dumps(times), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def _env(pairs):
    return dict(pair.split('=', 1) for pair in pairs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--trials', type=int, default=20)
    parser.add_argument('--sub-env', nargs='*', default=[])
    parser.add_argument('--pub-env', nargs='*', default=[])
    parser.add_argument('--sub-qos', default='best_effort')
    parser.add_argument('--pub-qos', default='reliable')
    parser.add_argument('--sub-prefix', default='', help="the subscriber's command prefix")
    parser.add_argument('--sub-fifo', type=int, default=0,
                        help="the subscriber's SCHED_FIFO priority while it makes its participant")
    parser.add_argument('--sub-delay', type=float, default=0.0,
                        help='[s] from the participant to the subscription')
    parser.add_argument('--sim', action='store_true',
                        help='the publisher: rnea-sim (the bundled arm at 1 kHz)')
    parser.add_argument('--extra', type=int, default=0,
                        help='pairs of other endpoints made just before the subscription')
    parser.add_argument('--burn', type=float, default=0.0,
                        help="[s] the subscriber's main thread busy after the participant")
    parser.add_argument('--role', choices=['pub', 'sub'])
    options = parser.parse_args()
    if options.role == 'pub':
        return publisher(options.pub_qos)
    if options.role == 'sub':
        return subscriber(options.sub_qos, options.sub_fifo, options.sub_delay,
                          options.extra, options.burn)
    os.environ.setdefault('ROS_DOMAIN_ID', str(81 + os.getpid() % 9))
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')
    load = [os.getloadavg()[0]]
    program = ([str(Path(sys.executable).with_name('rnea-sim'))] if options.sim else
               [sys.executable, __file__, '--role', 'pub', '--pub-qos', options.pub_qos])
    pub = subprocess.Popen(program, env=dict(os.environ, **_env(options.pub_env)),
                           stdout=subprocess.DEVNULL)
    rows = []
    prefix = options.sub_prefix.split()
    try:
        time.sleep(3.0)
        for _ in range(options.trials):
            out = subprocess.run([*prefix, sys.executable, __file__, '--role', 'sub', '--sub-qos',
                                  options.sub_qos, '--sub-fifo', str(options.sub_fifo),
                                  '--sub-delay', str(options.sub_delay),
                                  '--extra', str(options.extra), '--burn', str(options.burn)],
                                 capture_output=True, text=True,
                                 env=dict(os.environ, **_env(options.sub_env)), timeout=30)
            line = [text for text in out.stdout.splitlines() if text.startswith('{')]
            rows.append(json.loads(line[-1]) if line else {})
            print(rows[-1], flush=True)
            time.sleep(0.3)
    finally:
        pub.send_signal(2)
        pub.wait(10)
    load.append(os.getloadavg()[0])
    print(f'domain {os.environ["ROS_DOMAIN_ID"]} sub-env {options.sub_env} pub-env '
          f'{options.pub_env} sub-prefix {prefix} sub-qos {options.sub_qos} '
          f'pub-qos {options.pub_qos} sub-fifo {options.sub_fifo} delay {options.sub_delay} '
          f'sim {options.sim} extra {options.extra} burn {options.burn} N={len(rows)} '
          f'load {load[0]:.2f}->{load[1]:.2f}')
    for column, since in (('node', None), ('graph', 'node'), ('msg', 'node'), ('msg', 'sub')):
        values = sorted(row.get(column, float('inf')) - row.get(since, 0) for row in rows)
        slow = sum(value > 1.0 for value in values)
        print(f'{column:5s} - {since or "start":5s} >1s {slow:2d}/{len(values)}: '
              + ' '.join(f'{value:.2f}' for value in values))


if __name__ == '__main__':
    main()
