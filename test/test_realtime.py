"""ros/realtime.py: the timer callback rclpy reads cheaply, and the helper threads' spinner."""
import inspect
import threading
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.experimental import EventsExecutor

from rnea_controller.ros import realtime


class Counter:
    def __init__(self):
        self.calls = 0
        self.done = threading.Event()

    def tick(self):
        self.calls += 1
        if self.calls == 5:
            self.done.set()


def test_timer_callback_states_an_empty_signature_and_calls_the_method():
    counter = Counter()
    callback = realtime.timer_callback(counter.tick)
    assert inspect.signature(callback).parameters == {}  # rclpy passes no TimerInfo
    assert callback.__name__ == 'tick'
    callback()
    assert counter.calls == 1


@pytest.mark.parametrize('make_executor', [EventsExecutor, SingleThreadedExecutor])
def test_rclpy_timers_run_the_wrapped_method(make_executor):
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('timer_callback_test', context=context)
        executor = make_executor(context=context)
        executor.add_node(node)
        counter = Counter()
        node.create_timer(0.001, realtime.timer_callback(counter.tick))
        for _ in range(2000):
            if counter.done.is_set():
                break
            executor.spin_once(timeout_sec=0.01)
        assert counter.calls >= 5
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize('kind', ['single', 'events'])
def test_background_spinner_runs_callbacks_and_stops(kind):
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('spinner_test', context=context)
        counter = Counter()
        node.create_timer(0.002, realtime.timer_callback(counter.tick))
        spinner = realtime.BackgroundSpinner(node, 'spinner_test', kind)
        assert counter.done.wait(10.0)
        spinner.stop(timeout=10.0)
        assert not spinner._thread.is_alive()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize('kind', ['single', 'events'])
def test_stop_ends_an_idle_spinner_without_waiting_for_its_timeout(kind):
    """A spinner with nothing to do sleeps in spin_once for `idle_wait`; stop must end it at
    once (rclpy's Executor.wake does not: the node's deactivation waited on the sleep)."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('idle_spinner_test', context=context)
        spinner = realtime.BackgroundSpinner(node, 'idle_spinner_test', kind, idle_wait=60.0)
        time.sleep(0.2)  # the thread is asleep in its wait
        spinner.stop(timeout=20.0)
        assert not spinner._thread.is_alive(), 'stop waited for the 60 s idle wait'
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
