"""ros/realtime.py: the timer callback rclpy reads cheaply, the helper threads' spinner, and the
participant made at real-time priority."""
import inspect
import os
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


def _policy(tid=0):
    return os.sched_getscheduler(tid)


def _may_set_fifo():
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


@pytest.mark.skipif(not _may_set_fifo(), reason='SCHED_FIFO needs the privilege (rtprio)')
def test_unpreempted_runs_make_at_fifo_and_restores_every_thread():
    """The participant's maker runs at SCHED_FIFO (its answer lost otherwise, issue 35); after
    it, neither the calling thread nor a thread it started (a DDS thread inherits the policy)
    keeps real-time priority: DDS threads stay at normal priority (module doc)."""
    seen, started, release = {}, {}, threading.Event()

    def worker():
        started['tid'] = threading.get_native_id()
        started['policy'] = _policy()
        release.wait(10.0)

    def make():
        seen['policy'] = _policy()
        thread = threading.Thread(target=worker)
        thread.start()
        while 'tid' not in started:
            time.sleep(0.001)
        return thread

    assert _policy() == os.SCHED_OTHER
    thread = realtime.unpreempted(make)
    try:
        assert seen['policy'] == os.SCHED_FIFO
        assert started['policy'] == os.SCHED_FIFO  # inherited while `make` ran
        assert _policy() == os.SCHED_OTHER
        assert _policy(started['tid']) == os.SCHED_OTHER
    finally:
        release.set()
        thread.join()


def test_unpreempted_without_the_privilege_just_makes(monkeypatch):
    """A user without rtprio: the participant is made as before, without an error."""
    def refuse(*args):
        raise PermissionError(1, 'Operation not permitted')
    monkeypatch.setattr(os, 'sched_setscheduler', refuse)
    assert realtime.unpreempted(lambda: 'made') == 'made'


def test_work_waiting_for_the_slack_starts_after_the_next_tick_ends():
    """realtime.Slack: a helper's wait ends when the next tick ends (`ticked`), not before
    (a tick that ended before the wait began does not count: the work would run across the
    next one); with no tick it ends by itself after two periods (a loop that does not run
    holds nothing up)."""
    slack, period = realtime.Slack(), 0.05
    slack.ticked()  # a tick that ended before the helper came
    began = []

    def helper():
        slack.wait(period)
        began.append(time.monotonic())
    thread = threading.Thread(target=helper)
    thread.start()
    time.sleep(0.02)
    ended = time.monotonic()
    slack.ticked()
    thread.join(5.0)
    assert began and began[0] >= ended, (began, ended)
    start = time.monotonic()
    slack.wait(period)  # nothing ticks
    assert 2 * period <= time.monotonic() - start < 5.0
