"""On activation: do our `joints` equal those of the ros2_control effort controller we drive?

The effort controller named by parameter `effort_controller` (default 'effort_controller', in
this node's namespace) is asked for its `joints` parameter through its parameter service. The
question runs in a separate rclpy context with its own node and executor, so that no service
call ever blocks inside a callback of the controller's executor. That context is opened at
configure and closed at cleanup: DDS discovers the service in the background meanwhile, so an
activation long after configure does not wait for discovery. It waits at most `DISCOVERY` seconds
for the service (a new participant on a loaded host takes more than a second to be seen), then
`ANSWER` seconds for the answer. No answer: the check is skipped, and the log says so.
"""
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import parameter_value_to_python

DISCOVERY = 3.0  # [s] for the service to appear
ANSWER = 1.0  # [s] for its answer


class EffortControllerCheck:
    """The question to one effort controller, from configure (construction) to `close`."""

    def __init__(self, node):
        name = node.get_parameter('effort_controller').value
        self.controller = f'{node.get_namespace().rstrip("/")}/{name}' if name else None
        self._context = None
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
        """Why `joints` do not match the effort controller's, or None (also when unanswered:
        a warning on `logger` then, since the controller may be spawned later)."""
        if self.controller is None:
            return None
        theirs, why_not = self._ask_joints()
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
        if not self._client.wait_for_service(DISCOVERY):
            return None, f'did not answer within {DISCOVERY:g} s'
        future = self._client.call_async(GetParameters.Request(names=['joints']))
        self._executor.spin_until_future_complete(future, ANSWER)
        if not future.done():
            return None, f'did not answer within {ANSWER:g} s'
        values = future.result().values
        value = parameter_value_to_python(values[0]) if values else None
        if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
            return None, f'has no string-array parameter joints (answered {value!r})'
        return value, None

    def close(self):
        if self._context is not None:
            self._executor.shutdown()
            self._node.destroy_node()
            rclpy.shutdown(context=self._context)
            self._context = None
