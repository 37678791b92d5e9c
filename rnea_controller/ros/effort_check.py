"""Our `joints` against those of the ros2_control effort controller we drive, without holding
activation.

The effort controller named by parameter `effort_controller` (default 'effort_controller', in
this node's namespace) is asked for its `joints` parameter through its parameter service. The
question runs in a separate rclpy context with its own node and executor, so that no service
call ever blocks inside a callback of the controller's executor. That context is opened at
configure and closed at cleanup: DDS discovers the service in the background meanwhile.

On activation, a service already seen is asked at once (at most `ANSWER` seconds): a mismatch
refuses the activation. A service not seen yet does not hold the activation (a topic-level
driver, a simulator or a controller spawned later has none, and waiting for discovery cost 3 s
of every start-up, issue 26): a thread of the helper asks it the moment it appears, and a
mismatch found then is left in `refusal` for the tick, which stops commanding at once and
deactivates without a final command. A question unanswered (a service just discovered may not
have discovered our client yet) is asked again by that thread, `ATTEMPTS` times in all. No
answer, or no string-array `joints`: the check is skipped, and the log says so.
"""
import threading

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import parameter_value_to_python

ANSWER = 1.0  # [s] for its answer
ATTEMPTS = 3  # questions to a service seen but not answering
UNANSWERED = f'did not answer within {ANSWER:g} s'
LOOK = 0.1  # [s] between two looks for the service in the graph


class EffortControllerCheck:
    """The question to one effort controller, from configure (construction) to `close`."""

    def __init__(self, node):
        name = node.get_parameter('effort_controller').value
        self.controller = f'{node.get_namespace().rstrip("/")}/{name}' if name else None
        self._context, self._watch, self.refusal = None, None, None
        self._closing = threading.Event()
        if self.controller is None:
            return
        from rcl_interfaces.srv import GetParameters
        self._context = rclpy.Context()
        rclpy.init(args=[], context=self._context)  # no --ros-args: the helper keeps its name
        self._node = rclpy.create_node(  # named after ours: two arms' helpers differ
            f'{node.get_name()}_effort_check', namespace=node.get_namespace(),
            context=self._context, enable_rosout=False, start_parameter_services=False)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._client = self._node.create_client(GetParameters,
                                                f'{self.controller}/get_parameters')

    def mismatch(self, joints, logger):
        """Activation: why `joints` do not match the effort controller's, or None. A controller
        not seen yet is checked by a thread when it appears (`refusal`); unanswered questions
        are warnings on `logger` (the controller may be spawned later)."""
        self.refusal = None
        if self.controller is None or (self._watch is not None and self._watch.is_alive()):
            return None
        if self._client.service_is_ready():
            theirs, why_not = self._ask_joints()
            if why_not != UNANSWERED:
                return self._compare(theirs, why_not, joints, logger)
        else:
            logger.warning(f'effort controller {self.controller} not seen yet (no '
                           f'{self.controller}/get_parameters): active now, its joints are '
                           'checked when it appears')
        self._watch = threading.Thread(target=self._watch_for, args=(joints, logger),
                                       name='effort check', daemon=True)
        self._watch.start()
        return None

    def _watch_for(self, joints, logger):
        """The helper's thread: wait for the service (until `close`), then ask it, again if
        unanswered (a service just discovered may not have discovered us yet), and compare."""
        for _ in range(ATTEMPTS):
            while not self._client.wait_for_service(LOOK):
                if self._closing.is_set():
                    return
            theirs, why_not = self._ask_joints()
            if why_not != UNANSWERED:
                break
        self.refusal = self._compare(theirs, why_not, joints, logger)

    def _compare(self, theirs, why_not, joints, logger):
        """Why `theirs` differ from `joints` (None if equal, or unknown: logged)."""
        if theirs is None:
            logger.warning(f'effort controller check skipped: {self.controller}/get_parameters '
                           f'{why_not}')
            return None
        if list(theirs) != list(joints):
            return (f'the effort controller {self.controller} has joints {list(theirs)}, '
                    f'this controller {list(joints)}: same joints in the same order needed')
        logger.info(f'effort controller {self.controller} has the same joints')
        return None

    def _ask_joints(self):
        """(their `joints`, None), or (None, why there is no answer to compare)."""
        from rcl_interfaces.srv import GetParameters
        future = self._client.call_async(GetParameters.Request(names=['joints']))
        self._executor.spin_until_future_complete(future, ANSWER)
        if not future.done():
            self._client.remove_pending_request(future)
            return None, UNANSWERED
        values = future.result().values
        value = parameter_value_to_python(values[0]) if values else None
        if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
            return None, f'has no string-array parameter joints (answered {value!r})'
        return value, None

    def close(self):
        if self._context is not None:
            self._closing.set()
            if self._watch is not None:
                self._watch.join()
            self._executor.shutdown()
            self._node.destroy_node()
            rclpy.shutdown(context=self._context)
            self._context = None
