"""The commands README.md and docs/ show are the commands that exist: every ``flashschnet-CMD`` named is an
installed console script, and every ``--option`` written on a ``flashschnet-CMD`` command line (code blocks and
inline code, backslash continuations joined) is an option of that command's parser; every extra they name is
setup.py's, and docs/install.md lists each."""
from __future__ import annotations

import argparse
import importlib
import re

import pytest

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ENTRY = re.compile(r'"flashschnet-([\w-]+) = flashschnet\.scripts\.(\w+):main"')
COMMANDS = dict(ENTRY.findall((ROOT / "setup.py").read_text()))       # flashschnet-CMD -> scripts module


def options_of(module: str) -> set:
    parser = importlib.import_module(f"flashschnet.scripts.{module}").build_parser()
    found, todo = set(), [parser]
    while todo:
        for action in todo.pop()._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def command_lines(text: str):
    """(CMD, the rest of its command line) for each ``flashschnet-CMD`` in ``text``."""
    text = re.sub(r"\\\n\s*", " ", text)              # a shell line continued with a backslash
    for m in re.finditer(r"(?<![\w-])flashschnet-([\w-]+)((?:[ \t]+[^\s`|;&#)]+)*)", text):
        yield m.group(1), m.group(2)


def test_the_docs_name_commands_that_exist():
    assert len(COMMANDS) >= 10, COMMANDS
    # flashschnet-compare's outputs and the like are files, not commands: only names followed by a space or `
    named = {(p.name, m) for p in DOCS for m in re.findall(r"(?<![\w-])flashschnet-([a-z]+)(?=[\s`])", p.read_text())}
    unknown = sorted((f, m) for f, m in named if m not in COMMANDS)
    assert not unknown, f"docs name commands that do not exist: {unknown}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_options_on_each_command_line_exist(doc):
    parsers = {}
    wrong = []
    for cmd, rest in command_lines(doc.read_text()):
        if cmd not in COMMANDS:
            continue
        known = parsers.setdefault(cmd, options_of(COMMANDS[cmd]))
        wrong += [f"flashschnet-{cmd} {o}" for o in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest) if o not in known]
    assert not wrong, f"{doc.name} shows options the commands do not have (see their --help): {sorted(set(wrong))}"


def test_the_extras_the_docs_name_are_setups_and_install_md_lists_each():
    """Every extra written as ``.[X]`` / ``flashschnet[X]`` (also combined, ``.[a,b]``) in README.md and docs/ is one
    of setup.py's, and docs/install.md's table has a row for each of setup.py's extras."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    extras = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EXTRAS" for t in node.targets):
            extras |= {k.value for k in node.value.keys}
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript) and \
                isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == "EXTRAS":
            extras.add(node.targets[0].slice.value)
    assert {"martini", "analysis", "backmap", "all", "pinned", "cuda13"} <= extras, extras
    named = set()
    for doc in DOCS:
        for group in re.findall(r"(?:\.|flashschnet)\[([\w,-]+)\]", doc.read_text()):
            named |= {(doc.name, x) for x in group.split(",") if x}
    unknown = sorted((d, x) for d, x in named if x not in extras)
    assert not unknown, f"the docs name extras setup.py does not have: {unknown}"
    table = (ROOT / "docs" / "install.md").read_text()
    rows = {x for line in table.splitlines() if line.startswith("| `'.[")          # a row's first cell names them
            for x in re.findall(r"`'\.\[([\w-]+)\]'`", line.split("|")[1])}
    assert extras <= rows, f"docs/install.md's extras table lacks: {sorted(extras - rows)}"
