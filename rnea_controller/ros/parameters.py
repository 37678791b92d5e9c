"""The controller's ROS parameters, from the one table (control/parameters.py).

`declare_global` and `declare_joints` declare every parameter with a ParameterDescriptor made
from its table entry (description with unit, range as ROS ranges, change rule as
additional_constraints). `refusal` applies what the table says about WHEN a parameter may
change, and refuses a request naming one parameter twice. The node's on-set callback
(`ControllerNode._on_set_parameters`) then validates the whole set of values with
`validate_parameters` and hands the new config to the tick, which swaps it in at its start.

`ParameterServices`: the node's six parameter services are served by a helper node's own
thread (issue 45): a request's checks and validation (a few ms each: the parameters' values,
the model, the law at the current state) ran on the loop's thread, and a burst of 20 sets
delayed ticks by 80-245 ms on a loaded 2-core host (`./run bench intake`).
"""
import weakref

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.parameter import Parameter
from rclpy.parameter_service import ParameterService

from rnea_controller.control.parameters import (
    GLOBAL,
    JOINT,
    LINK,
    link_of_parameter,
    PER_JOINT,
    PER_LINK,
    spec_of,
)
from rnea_controller.errors import ParameterError
from rnea_controller.ros import realtime

_UNSET_TYPES = {'double': Parameter.Type.DOUBLE, 'string_array': Parameter.Type.STRING_ARRAY,
                'int': Parameter.Type.INTEGER, 'string': Parameter.Type.STRING,
                'double_array': Parameter.Type.DOUBLE_ARRAY}


def descriptor(spec):
    """The ParameterDescriptor of a table entry (ranges for int and double scalars)."""
    unit = f' [{spec.unit}]' if spec.unit else ''
    constraints = '; '.join(x for x in (spec.bounds_text(), f'changes: {spec.change}') if x)
    result = ParameterDescriptor(description=spec.description + unit,
                                 additional_constraints=constraints,
                                 dynamic_typing=spec.dynamic)
    if spec.kind == 'int' and spec.low is not None:
        result.integer_range = [IntegerRange(from_value=int(spec.low), to_value=int(spec.high),
                                             step=1)]
    elif spec.kind == 'double' and spec.low is not None:
        result.floating_point_range = [FloatingPointRange(
            from_value=float(spec.low), to_value=float(spec.high))]
    return result


def _declare(node, name, spec):
    """Declare one parameter; a start-up value (--ros-args, params file) outside its
    descriptor is a ParameterError naming it, its value and the range."""
    if not node.has_parameter(name):
        value = _UNSET_TYPES[spec.kind] if spec.default is None else spec.default
        try:
            node.declare_parameter(name, value, descriptor(spec))
        except (InvalidParameterTypeException, InvalidParameterValueException) as error:
            allowed = f'{spec.kind} {spec.bounds_text()} {spec.unit}'.rstrip()
            raise ParameterError(f'{name}: the value given at start-up (--ros-args or params '
                                 f'file) is refused, it must be {allowed}: {error}') from None


def declare_global(node):
    """Declare every parameter of the table that is not per joint."""
    for spec in GLOBAL:
        _declare(node, spec.name, spec)


def declare_joints(node, joints):
    """Declare the per-joint parameters (gains.<joint>.p ...) of these joints."""
    for joint in joints:
        for spec in PER_JOINT:
            _declare(node, spec.name.replace(JOINT, joint), spec)


def declare_links(node, links):
    """Declare the per-link parameters (links.<link>.mass ...) of these links."""
    for link in links:
        for spec in PER_LINK:
            _declare(node, spec.name.replace(LINK, link), spec)


def check_link_overrides(node, links):
    """ParameterError if a start-up value (params file, --ros-args) names links.<link>.* of a
    link that is not one of `links` (a file identified on another description): rclpy would
    silently ignore it, as it is never declared, and the node would run the URDF's body."""
    overrides = getattr(node, '_parameter_overrides', {})  # rclpy keeps them there
    for name in sorted(overrides):
        spec_link = link_of_parameter(name)
        if spec_link is not None and spec_link not in links:
            raise ParameterError(f'{name}: {spec_link!r} (params file or --ros-args) is not a '
                                 f'link moved by a joint of the model (those are '
                                 f'{", ".join(links)})')


def values(node, joints, changes=(), links=()):
    """{name: value} of the table's parameters (unset: None), per-joint ones of `joints` and
    per-link ones of `links` only, with the requested `changes` (rclpy Parameters) applied."""
    names = [spec.name for spec in GLOBAL]
    names += [spec.name.replace(JOINT, joint) for joint in joints for spec in PER_JOINT]
    names += [spec.name.replace(LINK, link) for link in links for spec in PER_LINK]
    result = {name: value(node, name) for name in names if node.has_parameter(name)}
    known = set(names)  # not ours (use_sim_time, ...) and other joints' are not the law's
    for parameter in changes:
        if parameter.name in known:
            result[parameter.name] = parameter.value
    return result


def value(node, name):
    """A declared parameter's value; None if it is unset."""
    return node.get_parameter_or(name, _UNSET).value


_UNSET = Parameter('unset', value=None)


def refusal(parameters, configured, running):
    """Why this change may not happen now (table change rules, a name twice), or None."""
    names = [p.name for p in parameters]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        return f'{twice} named more than once in one request: refused whole'
    rules = {}
    for name in names:
        try:
            rules[name] = spec_of(name)[0].change
        except KeyError:
            rules[name] = 'always'  # not ours (use_sim_time, ...)
    frozen = sorted(n for n, rule in rules.items() if rule == 'unconfigured')
    if configured and frozen:
        return f'{frozen} can only change while unconfigured'
    inactive = sorted(n for n, rule in rules.items() if rule == 'inactive')
    if running and inactive:
        return f'{", ".join(inactive)} can only change while inactive'
    return None


class ParameterServices:
    """rclpy's ParameterService of `controller` (made with start_parameter_services=False),
    its services on a helper node (`<node>_parameters`, the controller's namespace, no global
    ROS arguments) spun by its own thread: the same service names, answered by the
    controller's parameters and its on-set callback, off the loop's thread."""

    def __init__(self, controller):
        import rclpy
        self.node = rclpy.create_node(controller.get_name() + '_parameters',
                                      namespace=controller.get_namespace(),
                                      context=controller.context, use_global_arguments=False,
                                      start_parameter_services=False)
        self.service = ParameterService(_ServicesOn(self.node, controller.get_name()))
        self.service._node_weak_ref = weakref.ref(controller)  # what the callbacks act on
        self.spinner = realtime.BackgroundSpinner(self.node, 'parameters')

    def destroy(self):
        self.spinner.stop()
        self.node.destroy_node()


class _ServicesOn:
    """What ParameterService's constructor asks of a node: the name its services are under
    (the controller's) and `create_service`, here the helper node's."""

    def __init__(self, node, name):
        self._node, self._name = node, name

    def get_name(self):
        return self._name

    def create_service(self, *args, **kwargs):
        return self._node.create_service(*args, **kwargs)
