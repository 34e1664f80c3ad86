"""The commands README.md and docs/ show are the commands that exist: every ``flashschnet-CMD`` named is an
installed console script, and every ``--option`` written on a ``flashschnet-CMD`` command line (code blocks and
inline code, backslash continuations joined) is an option of that command's parser; every extra they name is
setup.py's, and docs/install.md lists each; every message README.md, docs/usage.md and docs/reliability.md quote is
one the code prints."""
from __future__ import annotations

import argparse
import ast
import errno
import functools
import importlib
import io
import os
import re
import tokenize
import warnings

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


# -- the messages the docs quote ------------------------------------------------------------------------------------

#: the docs that quote flashschnet's messages (docs/*.md else quote phrases, titles and other programs' output too)
QUOTING_DOCS = [ROOT / "README.md", ROOT / "docs" / "usage.md", ROOT / "docs" / "reliability.md"]
#: messages the docs quote that another program prints (each: who), so they are not looked for in ours
OTHER_PROGRAMS = {
    "Particle coordinate is NaN": "OpenMM's CPU platform, refusing to step on a NaN position",
    "does not support all required kernels": "OpenMM, for a TorchForce whose plugin's kernels did not load",
}
#: where a quote stands for what the code formats in: elisions; paths and file names; the docs' names for values
#: (DIR, OUT, RUN_DIR, OUTPUT; S a step, B a block, T K a temperature, WWW a walker); errno names and the OS's own
#: texts for them (strerror: "No space left on device"); numbers
PLACEHOLDER = re.compile("|".join([
    r"\.\.\.", "…", r"[\w./<>-]*\.(?:pdb|dcd|csv|json|chk|txt|pt|npz|png)\b",
    r"\b(?:DIR|OUT|RUN_DIR|OUTPUT|S|B|T|K|WWW)\b", r"\b(?:%s)\b" % "|".join(errno.errorcode.values()),
    *sorted(map(re.escape, {os.strerror(n) for n in errno.errorcode}), key=len, reverse=True),
    r"(?<![\w-])-?\d[\d.,]*\d|(?<![\w-])\d"]))
FIELD = "\ue000"                                        # a value formatted into a message (f-string field, %s, {})


def _cells(text: str):
    """(the headings, [(the cell's column header or None, its text)]) of a markdown ``text``: each table cell and
    each prose paragraph or bullet (lines joined) outside code fences and comments, inline code as ``…``."""
    headings, cells, para, header, fence = [], [], [], None, False
    lines = text.splitlines()

    def end_paragraph():
        if para:
            cells.append((None, " ".join(para)))
            para.clear()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```") or fence:
            end_paragraph()
            fence ^= s.startswith("```")
        elif s.startswith("#"):
            end_paragraph()
            headings.append(s.lstrip("#").strip())
        elif s.startswith("|"):
            end_paragraph()
            row = [c.strip() for c in re.sub(r"`[^`]*`", "…", s).strip("|").split("|")]
            if re.fullmatch(r"\|[-|: ]+", lines[i + 1].strip() if i + 1 < len(lines) else ""):
                header = row                                         # the row above |---|---|
            elif not re.fullmatch(r"[-|: ]+", s):
                cells += [(header[j] if header and j < len(header) else None, c) for j, c in enumerate(row)]
        elif not s or s.startswith("<!--") or re.match(r"[*-] ", s):
            end_paragraph()
            if s and not s.startswith("<!--"):
                para.append(re.sub(r"`[^`]*`", "…", s))
        else:
            para.append(re.sub(r"`[^`]*`", "…", s))
    end_paragraph()
    return headings, cells


@functools.lru_cache(maxsize=None)
def _headings() -> frozenset:
    return frozenset(h for doc in DOCS for h in _cells(doc.read_text())[0])


def quoted(text: str):
    """The double-quoted phrases of ``text``, paired in order within one table cell or paragraph (so the text
    between two quotes is none); not those in code, in a column of the behaviour before a fix ("Before", "What
    happened"), nor a section's title (a quote that starts a heading of README.md or docs/)."""
    for column, cell in _cells(text)[1]:
        if column not in ("Before", "What happened"):
            yield from (q for q in re.findall(r'"([^"]*)"', cell) if not any(h.startswith(q) for h in _headings()))


def _literal(token: str):
    """A string token's text (each formatted-in value as FIELD) and the literals inside its f-string fields."""
    prefix = re.match(r"[a-zA-Z]*", token).group().lower()
    if "b" in prefix:
        return "", []
    quote = token[len(prefix):][:3] if token[len(prefix):][:3] in ('"""', "'" * 3) else token[len(prefix)]
    body, text, code, depth, i = token[len(prefix) + len(quote):-len(quote)], [], [], 0, 0
    while i < len(body):
        c, i = body[i], i + 1
        if "f" not in prefix or depth == 0 and c not in "{}":
            text.append(c)
        elif depth == 0 and body[i - 1:i + 1] in ("{{", "}}"):
            text.append(c)                                  # a brace, written twice
            i += 1
        elif c == "{":
            text += [FIELD] if depth == 0 else []
            code.append(c if depth else " ")
            depth += 1
        else:
            depth = max(depth - (c == "}"), 0)
            code.append(c if depth else " ")                # a field's code: its literals are messages too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            text = ast.literal_eval(prefix.replace("f", "") + quote + "".join(text) + quote)
        except (SyntaxError, ValueError):                   # e.g. a backslash before a field: the text as written
            text = "".join(text)
    if "f" not in prefix:                                   # "...{}...".format(x), "...%s..." % x
        text = re.sub(r"\{[^{}]*\}|%(?:\(\w+\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgex]", FIELD, text)
    strings = r"""(?i:[ruf]{0,2})(?:'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")"""
    return text, [_literal(m.group())[0] for m in re.finditer(strings, "".join(code))]


@functools.lru_cache(maxsize=None)
def code_messages():
    """The string literals of model/, plugin/ and scripts/ but docstrings (adjacent and ``+``-joined literals as
    one), values as FIELD, whitespace collapsed: (all of them joined by FIELD, the set of the texts between FIELDs)."""
    texts = []
    for path in sorted(p for d in ("model", "plugin", "scripts") for p in (ROOT / d).rglob("*.py")):
        run, statement, prev = None, False, (tokenize.NEWLINE, "")
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type in (tokenize.NL, tokenize.COMMENT):
                continue
            if tok.type == tokenize.STRING:
                text, inner = _literal(tok.string)
                texts += inner
                if run is None:
                    run, statement = [], prev[0] in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
                run.append(text)
            elif run is not None and tok.string != "+":            # "a" + "b" is one; "a" + x ends with a FIELD
                if not (statement and tok.type == tokenize.NEWLINE):
                    texts.append("".join(run) + (FIELD if prev[1] == "+" else ""))
                run = None
            prev = (tok.type, tok.string)
    joined = re.sub(f" ?{FIELD} ?", FIELD, FIELD + FIELD.join(re.sub(r"\s+", " ", t) for t in texts) + FIELD)
    return joined, frozenset(s.strip() for s in joined.split(FIELD))


def _in_code(fragment: str) -> bool:
    """``fragment`` is in one literal, or is literals (or their ends) joined where the code formats values in: a
    first piece that ends a literal, whole ones between, a last one that starts one (whole words each)."""
    joined, whole = code_messages()

    def has(piece, before="", after=""):
        edge = (r"(?<!\w)" if piece[0].isalnum() else "", r"(?!\w)" if piece[-1].isalnum() else "")
        return before + piece + after in joined and \
            re.search(before + edge[0] + re.escape(piece) + edge[1] + after, joined) is not None
    if has(fragment):
        return True
    cuts = [0, *(i for i in range(1, len(fragment)) if not fragment[i - 1:i + 1].isalnum()), len(fragment)]
    reached = {0}
    for k, a in enumerate(cuts):
        for b in cuts[k + 1:] if a in reached else ():
            piece = fragment[a:b].strip()
            if piece and b not in reached and (a, b) != (0, len(fragment)):
                if a == 0 and has(piece, after=FIELD) or b == len(fragment) and has(piece, before=FIELD) or \
                        0 < a and b < len(fragment) and piece in whole:
                    reached.add(b)
    return len(fragment) in reached


def messages_not_in_code(text: str):
    """(quote, its fragments the code has not) for each message ``text`` quotes that the code does not print: a
    quote is cut at the placeholders into fragments, and each fragment of 3 words or more is looked for."""
    wrong = []
    for q in quoted(text):
        fragments = [f.strip() for f in PLACEHOLDER.split(re.sub(r"\s+", " ", q))]
        missing = [f for f in fragments if len(re.findall(r"\w+", f)) >= 3 and not _in_code(f)]
        if missing and q not in OTHER_PROGRAMS:
            wrong.append((q, missing))
    return wrong


@pytest.mark.parametrize("doc", QUOTING_DOCS, ids=lambda p: p.name)
def test_the_messages_the_docs_quote_are_the_ones_the_code_prints(doc):
    wrong = messages_not_in_code(doc.read_text())
    assert not wrong, f"{doc.name} quotes messages no literal in model/, plugin/ or scripts/ holds (fix the quote " \
                      f"to what the code prints now): {wrong}"


def test_a_quoted_message_with_one_word_changed_is_found():
    assert list(quoted('| say "a b c" and "d e f" | `f("x")` |')) == ["a b c", "d e f"]      # not " and "
    text = (ROOT / "docs" / "reliability.md").read_text()
    for old, new in [("give a larger --steps to extend it", "give a bigger --steps to extend it"),
                     ("file system); choose a writable place", "file system); choose a good place"),
                     ("stopping (last good checkpoint: step 20", "stopping (last safe checkpoint: step 20")]:
        assert old in text, old
        wrong = messages_not_in_code(text.replace(old, new))
        assert len(wrong) == 1 and new in wrong[0][0], (new, wrong)
    quotes = {q for doc in QUOTING_DOCS for q in quoted(doc.read_text())}
    assert set(OTHER_PROGRAMS) <= quotes, f"no longer quoted, drop them: {set(OTHER_PROGRAMS) - quotes}"
