"""URDF reader: XML text to a `Description` (links, joints), with line numbers in every error.

Reads what the dynamics needs (http://wiki.ros.org/urdf/XML): `<link><inertial>`,
`<joint>` with `type`, `<origin xyz rpy>`, `<parent>`, `<child>`, `<axis>`, `<limit>` and
`<mimic>`. Visual, collision, transmission, gazebo and other elements are ignored.
An effort or velocity limit of 0 means "not given" (many URDFs write it so): it is read as
absent (inf), like a missing attribute.
`<dynamics damping friction>` is read too (the controller's friction defaults).
"""
import xml.parsers.expat

import numpy as np

from rnea_controller.dynamics.description import (
    Description,
    here,
    JOINT_TYPES,
    JointSpec,
    LinkSpec,
    Mimic,
    unit_axis,
)
from rnea_controller.dynamics.spatial import inertia_matrix, rpy_matrix
from rnea_controller.errors import UrdfError


class _Element:
    """A parsed XML element: tag, attributes, children and its line in the source."""

    def __init__(self, tag, attrib, line):
        self.tag, self.attrib, self.line, self.children = tag, attrib, line, []

    def find(self, tag):
        return next((c for c in self.children if c.tag == tag), None)

    def findall(self, tag):
        return [c for c in self.children if c.tag == tag]


def parse_xml(text: str) -> _Element:
    """Parse XML into `_Element`s keeping line numbers; malformed XML raises UrdfError."""
    parser = xml.parsers.expat.ParserCreate()
    stack, roots = [], []

    def start(tag, attrib):
        element = _Element(tag, attrib, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as error:
        raise UrdfError(f'malformed XML at line {error.lineno}, column {error.offset}: '
                        f'{xml.parsers.expat.ErrorString(error.code)}') from None
    return roots[0]


def parse_urdf(text: str) -> Description:
    """URDF text to a `Description`; raises UrdfError naming the element and line."""
    if not isinstance(text, str) or not text.strip():
        raise UrdfError('URDF is empty')
    robot = parse_xml(text)
    if robot.tag != 'robot':
        raise UrdfError(f'root element is <{robot.tag}> (line {robot.line}), expected <robot>')
    links = tuple(_link(e) for e in robot.findall('link'))
    joints = tuple(_joint(e) for e in robot.findall('joint'))
    if not links:
        raise UrdfError('URDF has no <link>')
    _check_unique('link', links)
    _check_unique('joint', joints)
    return Description(robot.attrib.get('name', ''), links, joints, text)


def _check_unique(kind, items):
    seen = {}
    for item in items:
        if item.name in seen:
            raise UrdfError(f"{kind} name '{item.name}' is used twice ({seen[item.name]} and "
                            f'{item.where})')
        seen[item.name] = item.where


def _numbers(element, attribute, count, default, what):
    """Attribute of `count` floats, e.g. xyz="0 0 0.1"; `default` when absent."""
    if element is None or attribute not in element.attrib:
        return np.array(default, dtype=float)
    text = element.attrib[attribute]
    try:
        values = np.array([float(x) for x in text.split()], dtype=float)
    except ValueError:
        values = np.array([])
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise UrdfError(f'{what}: <{element.tag} {attribute}="{text}"> (line {element.line}) '
                        f'must be {count} finite numbers')
    return values


def _origin(element, what):
    origin = element.find('origin')
    xyz = _numbers(origin, 'xyz', 3, (0, 0, 0), what)
    rpy = _numbers(origin, 'rpy', 3, (0, 0, 0), what)
    return rpy_matrix(rpy), xyz


def _link(element):
    name = _name(element, 'link')
    where = f'line {element.line}'
    inertial = element.find('inertial')
    if inertial is None:
        return LinkSpec(name, where=where)
    what = here('link', name, where)
    R, com = _origin(inertial, what)
    mass = _numbers(inertial.find('mass'), 'value', 1, (0.0,), what)[0]
    tensor = inertial.find('inertia')
    values = [_numbers(tensor, key, 1, (0.0,), what)[0]
              for key in ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')]
    return LinkSpec(name, mass, com, R @ inertia_matrix(*values) @ R.T, where)


def _name(element, kind):
    name = element.attrib.get('name', '')
    if not name:
        raise UrdfError(f'<{kind}> without a name (line {element.line})')
    return name


def _joint(element):
    name = _name(element, 'joint')
    where = f'line {element.line}'
    what = here('joint', name, where)
    kind = element.attrib.get('type', '')
    if kind in ('floating', 'planar'):
        raise UrdfError(f'{what}: type "{kind}" is not supported (fixed-base arms only: '
                        'revolute, continuous, prismatic, fixed)')
    if kind not in JOINT_TYPES:
        raise UrdfError(f'{what}: unknown type "{kind}"; expected one of {", ".join(JOINT_TYPES)}')
    links = {}
    for role in ('parent', 'child'):
        tag = element.find(role)
        if tag is None or not tag.attrib.get('link'):
            raise UrdfError(f'{what}: missing <{role} link="..."/>')
        links[role] = tag.attrib['link']
    R, p = _origin(element, what)
    axis = np.zeros(3) if kind == 'fixed' else unit_axis(
        name, _numbers(element.find('axis'), 'xyz', 3, (1, 0, 0), what), where)
    limit = element.find('limit')
    lower, upper, effort, velocity = (
        _numbers(limit, key, 1, (default,), what)[0]
        for key, default in (('lower', -np.inf), ('upper', np.inf),
                             ('effort', np.inf), ('velocity', np.inf)))
    if kind == 'continuous' or (kind == 'revolute' and limit is None):
        lower, upper = -np.inf, np.inf
    effort, velocity = (np.inf if value == 0.0 else value for value in (effort, velocity))
    return JointSpec(name, kind, links['parent'], links['child'], R, p, axis,
                     lower, upper, effort, velocity,
                     _mimic(element.find('mimic'), what), where,
                     *_dynamics(element.find('dynamics'), what))


def _mimic(element, what):
    """`<mimic joint multiplier offset>` as a Mimic (multiplier 1, offset 0 by default)."""
    if element is None:
        return None
    if not element.attrib.get('joint'):
        raise UrdfError(f'{what}: <mimic> (line {element.line}) has no joint="..."')
    multiplier = _numbers(element, 'multiplier', 1, (1.0,), what)[0]
    offset = _numbers(element, 'offset', 1, (0.0,), what)[0]
    return Mimic(element.attrib['joint'], multiplier, offset)


def _dynamics(element, what):
    """(damping, friction) of `<dynamics damping friction>` (0 where absent), each ≥ 0."""
    values = [_numbers(element, key, 1, (0.0,), what)[0] for key in ('damping', 'friction')]
    for key, value in zip(('damping', 'friction'), values):
        if value < 0:
            raise UrdfError(f'{what}: <dynamics {key}="{value:g}"> (line {element.line}) must '
                            'not be negative')
    return values
