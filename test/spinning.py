"""The test clients' executor: rclpy's EventsExecutor, spun by a thread of its own.

The integration tests' clients take the node's 2 kHz of commands and references. rclpy's
SingleThreadedExecutor is Python through and through: on this 2-core host a client on it took
only 300-460 commands a second at 60-65 % of a core, so it fell seconds behind the node, and the
tests that waited for it were the flaky ones of earlier stops. The EventsExecutor (C++, in
rclpy since Jazzy) took 1,500-1,800 a second at 50-60 % of a core, catching up its backlog
(measured side by side, 10 s each, this stop).
"""
import threading

import rclpy
from rclpy.executors import ExternalShutdownException, ShutdownException
from rclpy.experimental import EventsExecutor


class Spinner:
    """An EventsExecutor for `nodes`, spun until `close` (spin_once in a loop, so that `close`
    can end the thread before it shuts the executor down; its C++ side must be shut down before
    the context, else std::terminate)."""

    def __init__(self, *nodes, context=None):
        self.executor = EventsExecutor(context=context or rclpy.get_default_context())
        for node in nodes:
            self.executor.add_node(node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, name='test spinner', daemon=True)
        self.thread.start()

    def _spin(self):
        try:
            while not self._stop.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=0.1)
        except (ExternalShutdownException, ShutdownException):
            pass

    def close(self):
        self._stop.set()
        self.executor.wake()
        self.thread.join(5.0)
        self.executor.shutdown()
