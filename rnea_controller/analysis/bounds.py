"""Where each moving body's mass may be: a bounding ellipsoid of its links' geometry, as the
linear matrix inequality tr(Q J) ≥ 0 on its pseudo-inertia J (Wensing, Kim & Slotine, RA-L
2018, §IV).

A body (the link moved by a joint, with every link fixed to it) has its points from its links'
<collision> geometry, else their <visual> geometry, in the body frame (`RobotModel.link_frames`):
a box's 8 corners, a cylinder's and a sphere's bounding box's, a mesh's bounding box when the
file can be read (binary or ASCII STL, COLLADA positions; `package://` resolved through
ROS_PACKAGE_PATH and AMENT_PREFIX_PATH, a relative or file:// path through `mesh_dirs`), scaled.
A link without readable geometry adds the segment from its body's origin to each child joint's
origin, widened by `MARGIN` (a sphere of `MARGIN` at the origin for a last link).

The ellipsoid is the one about the points' axis-aligned box (centre c, half sizes s): semi-axes
√3 s (it holds the box's corners), at least `MARGIN`. With A = diag(1 / semi-axes²),

    E = {x : (x - c)ᵀ A (x - c) ≤ 1} = {x : [x; 1]ᵀ Q [x; 1] ≥ 0},
    Q = [[-A, A c], [cᵀ A, 1 - cᵀ A c]],

and ∫ [x; 1]ᵀ Q [x; 1] dm = tr(Q J): a mass distribution inside E has tr(Q J) ≥ 0 (a necessary
condition, exact for point masses on its boundary). When the URDF's own inertia is not inside
(a CAD com outside its collision hull), the ellipsoid grows about c until it is: the prior is
always plausible, so the identification's program is always feasible.
"""
import os
from pathlib import Path
import re
import struct
import xml.etree.ElementTree as ET

import numpy as np

MARGIN = 0.05  # [m] the radius about a segment, and the smallest semi-axis
GROWTH = 1.1  # the ellipsoid's growth per step while the URDF's body is not inside


def bounding_ellipsoids(model, theta0, pseudo_inertia, mesh_dirs=()):
    """[(Q (4×4), source)] per body: its ellipsoid's matrix, grown until tr(Q J⁰) ≥ 0 for the
    URDF's θ⁰ (10n,) (`pseudo_inertia`: θ -> J), and what it came from ('collision', 'visual',
    'segments', each '+grown' when grown)."""
    points, sources = _body_points(model, mesh_dirs)
    out = []
    for i in range(model.n):
        low, high = points[i].min(axis=0), points[i].max(axis=0)
        centre, semi = (low + high) / 2, np.maximum(np.sqrt(3.0) * (high - low) / 2, MARGIN)
        J0 = pseudo_inertia(theta0[10 * i:10 * i + 10])
        Q, source = ellipsoid_matrix(centre, semi), sources[i]
        for _ in range(100):
            if np.trace(Q @ J0) >= 1e-9 * J0[3, 3]:
                break
            semi, source = semi * GROWTH, sources[i] + '+grown'
            Q = ellipsoid_matrix(centre, semi)
        out.append((Q, source))
    return out


def ellipsoid_matrix(centre, semi_axes):
    """Q of the axis-aligned ellipsoid of `centre` [m] and `semi_axes` [m] (module doc).

    >>> Q = ellipsoid_matrix([0, 0, 1.0], [0.5, 0.5, 0.5])
    >>> float(np.array([0, 0, 1.5, 1.0]) @ Q @ np.array([0, 0, 1.5, 1.0]))
    0.0
    """
    c = np.asarray(centre, float)
    A = np.diag(1.0 / np.asarray(semi_axes, float) ** 2)
    Q = np.empty((4, 4))
    Q[:3, :3], Q[:3, 3], Q[3, :3], Q[3, 3] = -A, A @ c, A @ c, 1.0 - c @ A @ c
    return Q


def _body_points(model, mesh_dirs):
    """([points (k, 3) in the body frame] per body, [source] per body)."""
    root = ET.fromstring(model.urdf) if model.urdf else None
    links = {} if root is None else {link.get('name'): link for link in root.findall('link')}
    points = [[np.zeros((1, 3))] for _ in range(model.n)]
    kinds = [set() for _ in range(model.n)]
    for name, (body, R, p) in model.link_frames.items():
        if body < 0:
            continue
        local, kind = _link_points(links.get(name), mesh_dirs)
        if local is None:
            points[body].append(_segments(model, body))
            kinds[body].add('segments')
        else:
            points[body].append(local @ R.T + p)
            kinds[body].add(kind)
    return ([np.vstack(p) for p in points],
            ['+'.join(sorted(k)) or 'segments' for k in kinds])


def _segments(model, body):
    """The segment from the body's origin to each child joint's origin, widened by MARGIN."""
    ends = [model.p_tree[j] for j in range(model.n) if model.parents[j] == body]
    ends = [np.zeros(3)] + [e for e in ends if np.linalg.norm(e) > 1e-9]
    cube = MARGIN * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    return np.vstack([e + cube for e in ends])


def _link_points(link, mesh_dirs):
    """(points (k, 3) in the link frame, 'collision' | 'visual') of a link's geometry, or
    (None, None) when none of one kind can be read whole."""
    if link is None:
        return None, None
    for tag in ('collision', 'visual'):
        elements = link.findall(tag)
        shapes = [_element_points(e, mesh_dirs) for e in elements]
        if elements and all(s is not None for s in shapes):
            return np.vstack(shapes), tag
    return None, None


def _element_points(element, mesh_dirs):
    """The corners of a <collision> or <visual>'s geometry's bounding box in the link frame."""
    geometry = element.find('geometry')
    shape = geometry[0] if geometry is not None and len(geometry) else None
    if shape is None:
        return None
    if shape.tag == 'box':
        half = np.array(_floats(shape.get('size'))) / 2
        low, high = -half, half
    elif shape.tag == 'cylinder':
        r, h = float(shape.get('radius')), float(shape.get('length')) / 2
        low, high = -np.array([r, r, h]), np.array([r, r, h])
    elif shape.tag == 'sphere':
        r = float(shape.get('radius'))
        low, high = -np.full(3, r), np.full(3, r)
    elif shape.tag == 'mesh':
        vertices = read_mesh(shape.get('filename', ''), mesh_dirs)
        if vertices is None:
            return None
        vertices = vertices * np.array(_floats(shape.get('scale'), '1 1 1'))
        low, high = vertices.min(axis=0), vertices.max(axis=0)
    else:
        return None
    corners = np.array([[(low, high)[a][0], (low, high)[b][1], (low, high)[c][2]]
                        for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    origin = element.find('origin')
    xyz = _floats(origin.get('xyz') if origin is not None else None)
    rpy = _floats(origin.get('rpy') if origin is not None else None)
    return corners @ _rotation(rpy).T + np.array(xyz)


def _floats(text, default='0 0 0'):
    return [float(x) for x in (text or default).split()]


def _rotation(rpy):
    """R = Rz(yaw) Ry(pitch) Rx(roll) of a URDF rpy [rad]."""
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def read_mesh(filename, mesh_dirs=()):
    """Vertices (k, 3) of an STL or COLLADA mesh file [its units], or None when it cannot be
    found or read."""
    path = _resolve(filename, mesh_dirs)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        if path.suffix.lower() == '.stl':
            return _stl(data)
        if path.suffix.lower() == '.dae':
            return _collada(data)
    except (OSError, ValueError, struct.error, ET.ParseError):
        return None
    return None


def _resolve(filename, mesh_dirs):
    if filename.startswith('file://'):
        filename = filename[len('file://'):]
    candidates = []
    if filename.startswith('package://'):
        package, _, rest = filename[len('package://'):].partition('/')
        for variable, share in (('ROS_PACKAGE_PATH', ''), ('AMENT_PREFIX_PATH', 'share')):
            for base in filter(None, os.environ.get(variable, '').split(os.pathsep)):
                candidates.append(Path(base) / share / package / rest)
        candidates += [Path(d) / package / rest for d in mesh_dirs]
    else:
        candidates = [Path(filename)] + [Path(d) / filename for d in mesh_dirs]
    return next((c for c in candidates if c.is_file()), None)


def _stl(data):
    if data[:5] == b'solid' and b'facet' in data[:1000]:
        numbers = re.findall(rb'vertex\s+(\S+)\s+(\S+)\s+(\S+)', data)
        return np.array(numbers, dtype=float) if numbers else None
    count = struct.unpack_from('<I', data, 80)[0]
    records = np.frombuffer(data, dtype=np.dtype([('n', '<f4', 3), ('v', '<f4', (3, 3)),
                                                  ('a', '<u2')]), count=count, offset=84)
    return records['v'].reshape(-1, 3).astype(float) if count else None


def _collada(data):
    """The positions of a COLLADA file's meshes (its node transforms ignored), times its unit."""
    root = ET.fromstring(data)
    ns = {'c': root.tag[1:].split('}')[0]} if root.tag.startswith('{') else {'c': ''}
    prefix = 'c:' if ns['c'] else ''
    unit = root.find(f'{prefix}asset/{prefix}unit', ns)
    meter = float(unit.get('meter', 1.0)) if unit is not None else 1.0
    arrays = [a for a in root.iter(f"{{{ns['c']}}}float_array" if ns['c'] else 'float_array')
              if 'position' in (a.get('id') or '').lower()]
    values = [np.array(a.text.split(), dtype=float).reshape(-1, 3) for a in arrays if a.text]
    return meter * np.vstack(values) if values else None
