"""On activation: do our `joints` equal those of the ros2_control effort controller we drive?

The effort controller named by parameter `effort_controller` (default 'effort_controller', in
this node's namespace) is asked for its `joints` parameter through its parameter service. The
question runs in a separate, short-lived rclpy context with its own node and executor, so
that no service call ever blocks inside a callback of the controller's executor; it waits at
most about `TIMEOUT` seconds for the service and as long for the answer. No answer: the check
is skipped, and the log says so.
"""
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import parameter_value_to_python

TIMEOUT = 1.0  # [s] for the service to appear, then for the answer


def _ask_joints(service, timeout=TIMEOUT):
    """The `joints` value from `<service>` (a GetParameters name), or None if no answer."""
    from rcl_interfaces.srv import GetParameters
    context = rclpy.Context()
    rclpy.init(args=[], context=context)  # no --ros-args: the helper keeps its own name
    try:
        node = rclpy.create_node('rnea_controller_effort_check', context=context,
                                 enable_rosout=False, start_parameter_services=False)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        client = node.create_client(GetParameters, service)
        if not client.wait_for_service(timeout):
            return None
        future = client.call_async(GetParameters.Request(names=['joints']))
        executor.spin_until_future_complete(future, timeout)
        if not future.done() or not future.result().values:
            return None
        return parameter_value_to_python(future.result().values[0])
    finally:
        rclpy.shutdown(context=context)


def effort_controller_mismatch(node, joints):
    """Why `joints` do not match the effort controller's, or None (also when unanswered)."""
    name = node.get_parameter('effort_controller').value
    if not name:
        return None
    namespace = node.get_namespace().rstrip('/')
    service = f'{namespace}/{name}/get_parameters'
    theirs = _ask_joints(service)
    if theirs is None:
        node.get_logger().info(f'effort controller check skipped: {service} did not answer '
                               f'within {TIMEOUT:g} s')
        return None
    if list(theirs) != list(joints):
        return (f'the effort controller {namespace}/{name} has joints {list(theirs)}, '
                f'this controller {list(joints)}: same joints in the same order needed')
    node.get_logger().info(f'effort controller {namespace}/{name} has the same joints')
    return None
