"""A joint-state feeder in its own process, for the integration tests.

The tests' "measured" state is published at 200 Hz by this separate process rather than by a
thread of the test process: that thread shared the GIL with the executor that receives the
node's 2 kHz of commands and references, and on a loaded machine it stalled for longer than the
node's state timeout (the node then, rightly, went stale). The test process tells the feeder
what to publish, one JSON line on its stdin per change, and the feeder acknowledges each with
the number of subscriptions its publisher has matched, so that after `set` returns every
message it publishes is the new state.

Each message is stamped when published. Run as a script: `python state_feeder.py TOPIC RATE_HZ
NODE_NAME`.
"""
import json
import select
import subprocess
import sys
import time


class StateFeeder:
    """Test side: start the feeder process and tell it which JointState to publish."""

    def __init__(self, topic='/joint_states', rate=200.0, name='test_state_feeder'):
        self.proc = subprocess.Popen([sys.executable, __file__, topic, str(rate), name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def _ask(self, request, timeout=20.0):
        self.proc.stdin.write(json.dumps(request) + '\n')
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ''
        if not line:
            raise RuntimeError(f'the state feeder did not answer {request!r} within {timeout} s '
                               f'(exit code {self.proc.poll()})')
        return int(line)

    def set(self, names, positions, velocities, stamp_offset=0.0):
        """Publish this state from the feeder's next period on, stamped `stamp_offset` [s]
        after the publication (a clock ahead; negative: behind); returns the subscription
        count."""
        return self._ask({'name': list(names), 'position': [float(x) for x in positions],
                          'velocity': [float(x) for x in velocities],
                          'stamp_offset': stamp_offset})

    def pause(self):
        return self._ask(None)

    def subscription_count(self):
        return self._ask('count')

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()  # end of input: the feeder exits
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)


def main(topic, rate, name):
    import rclpy
    import rclpy.time
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = rclpy.create_node(name)
    publisher = node.create_publisher(JointState, topic, 10)
    period, msg, offset_ns = 1.0 / rate, None, 0
    due = time.monotonic()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, due - time.monotonic()))
        if ready:
            line = sys.stdin.readline()  # one request in flight at a time: the test waits
            if not line:
                break
            request = json.loads(line)
            if request is None:
                msg = None
            elif request != 'count':
                offset_ns = round(request.pop('stamp_offset') * 1e9)
                msg = JointState(**request)
            print(publisher.get_subscription_count(), flush=True)
            continue
        if msg is not None:
            msg.header.stamp = rclpy.time.Time(
                nanoseconds=node.get_clock().now().nanoseconds + offset_ns).to_msg()
            publisher.publish(msg)
        due = max(due + period, time.monotonic())  # after a stall: on again, no burst
    node.destroy_node()
    rclpy.shutdown()


if __name__ == '__main__':
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
