"""The commands README.md and docs/ show are the commands that exist: every ``flashschnet-CMD`` named is an
installed console script, and every ``--option`` written on a ``flashschnet-CMD`` command line (code blocks and
inline code, backslash continuations joined) is an option of that command's parser."""
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
