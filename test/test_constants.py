"""docs/controller.md lists every constant of the control layer (issue 43): each numeric
module-level constant of the law, the adaptation, the contact observer, the modes (the brake)
and the timing has its row in the table "Every constant of the control layer", with its
value, its kind and its reason. A constant added without a row fails here, by name.
"""
import ast
import importlib

from conftest import REPO
import pytest

MODULES = ('law', 'adaptation', 'contact', 'modes', 'timing')
# array shapes and row indices, not tunings
STRUCTURAL = {'ROWS', 'GRAVITY', 'ESTIMATED'}


def table():
    text = (REPO / 'docs' / 'controller.md').read_text()
    start = text.index('### Every constant of the control layer')
    return text[start:text.index('\n### ', start + 1)]


def numeric_constants(name):
    """(name, value) of module `name`'s upper-case module-level names bound to a number."""
    module = importlib.import_module(f'rnea_controller.control.{name}')
    tree = ast.parse(open(module.__file__).read())
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    value = getattr(module, target.id)
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        yield target.id, value


@pytest.mark.parametrize('module', MODULES)
def test_every_numeric_constant_of_the_control_layer_has_its_row(module):
    rows = table()
    found = dict(numeric_constants(module))
    assert found, module  # the parse found the module's constants
    missing = [name for name in found if name not in STRUCTURAL and f'`{name}`' not in rows]
    assert not missing, (f"control/{module}.py: {missing} not in docs/controller.md's table "
                         f'"Every constant of the control layer"')


def test_a_constant_without_its_row_is_found():
    assert 'NOT_A_CONSTANT' not in table()
    assert 'HUNT_RATIO' in dict(numeric_constants('adaptation'))
    assert 'MAX_HORIZON' in dict(numeric_constants('timing'))
