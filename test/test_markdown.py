"""The README and docs/*.md render their tables whole (issue 31: a paragraph cut the README's
parameter table in two, and the rows after it rendered as text; a `|` in a cell, as in |qd|,
splits it unless escaped).

Oracle: markdown-it-py (CommonMark with GitHub's table extension, the parser rich uses) finds
the tables; every line that starts and ends with `|` outside a code block must be a row of one,
and each row must have as many cells as its header (a GFM renderer drops the cells beyond it).
"""
import re

from conftest import REPO
from markdown_it import MarkdownIt
import pytest

DOCUMENTS = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]


def cells(line):
    """The cells of a table row as GFM splits it: on every `|` not escaped by a backslash
    (also inside code spans), the outer pipes optional."""
    row = line.strip()
    row = row[1:] if row.startswith('|') else row
    row = row[:-1] if row.endswith('|') and not row.endswith('\\|') else row
    return re.split(r'(?<!\\)\|', row)


def broken_tables(text, name):
    """Messages naming each line of `text` that does not render as the table row it looks
    like: '<name>:<line>: ...'."""
    tokens = MarkdownIt('commonmark').enable('table').parse(text)
    lines = text.splitlines()
    in_table, in_code, problems = set(), set(), []
    for token in tokens:
        if token.type in ('fence', 'code_block', 'html_block') and token.map:
            in_code.update(range(*token.map))
        if token.type == 'table_open':
            start, end = token.map
            in_table.update(range(start, end))
            header = len(cells(lines[start]))
            for k in range(start + 2, end):
                if len(cells(lines[k])) != header:
                    problems.append(f'{name}:{k + 1}: {len(cells(lines[k]))} cells, the header '
                                    f'(line {start + 1}) has {header}: {lines[k].strip()[:60]}')
    for k, line in enumerate(lines):
        row = line.strip()
        if row.startswith('|') and row.endswith('|') and k not in in_table | in_code:
            problems.append(f'{name}:{k + 1}: renders as text, not as a table row (no header '
                            f'and delimiter row above it, or cut off by a paragraph): '
                            f'{line.strip()[:60]}')
    return problems


@pytest.mark.parametrize('path', DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_table_renders_whole(path):
    assert broken_tables(path.read_text(encoding='utf-8'), path.name) == []


def test_a_table_cut_by_a_paragraph_or_a_row_too_wide_is_found():
    """The README's parameter table as it was (issue 31), and a row with a cell too many."""
    cut = ('| parameter | default | |\n|---|---|---|\n| `a` | 1 | x |\n\n'
           'A paragraph that cut the table.\n| `b` | 2 | y |\n| `c` | 3 | z |\n')
    assert [p.split(': ')[0] for p in broken_tables(cut, 'README.md')] == [
        'README.md:6', 'README.md:7']
    wide = '| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 | 3 |\n'
    assert broken_tables(wide, 'x.md') == ['x.md:4: 3 cells, the header (line 1) has 2: '
                                           '| 1 | 2 | 3 |']
    piped = '| a | b |\n|---|---|\n| `x \\| y` | 2 |\n\n```\n| not a table |\n```\n'
    assert broken_tables(piped, 'y.md') == []  # an escaped pipe, a code block
