"""The command-line fuzzer's framework (tests/fuzz/test_fuzz_cli.py defines the commands and their tests).

A :class:`Command` is a valid, cheap argv of one command (``base``) and its fuzzed options (:class:`Opt`: a pool
of values typed by what the option expects, and an oracle that says which are valid). :func:`cases` draws one or
two option changes -- integers and floats: negative, zero, huge (1e308, 10**30, 2**31), nan, +-inf, '', text, '1e3'
for an integer, a Unicode digit; paths: missing, a directory, an empty file, random bytes, a Unicode path with
spaces, a place that cannot be written (an existing file, a path below a file, /sys), ''; choices: random text --
and sometimes an unknown option, a repeated one or a required one dropped. :func:`run_case` runs ``main(argv)``
in-process (:func:`invoke`) and checks the properties:

* an invalid value gives exit status 2 (the option's oracle says which values are valid); a valid one 0;
* stderr never holds a traceback; a failure is one ``PROG: error: ...`` line, after ``PROG: ...`` lines (notes,
  progress) or after argparse's usage (argparse's own errors);
* a failure leaves nothing that looks complete (the command's ``markers``: run.json / checkpoint, OUTPUT, JSON
  report, .npz, best.pt, validation.json that was not there before); a success leaves the complete output.

Path values are tokens (``@missing``, ``@fresh``, ...) that a :class:`~helpers.fuzz_cli_workspace.Workspace`
resolves to real paths per example; a stub raising :class:`Accepted` marks where a command's heavy work would
start (helpers/fuzz_cli_workspace.py).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from hypothesis import HealthCheck
from hypothesis import strategies as st

from tests.helpers.fuzz import fuzz_settings


def cli_settings(n: int):
    """``n`` examples per test (the CLI fuzz tests use function-scoped fixtures and filter their draws)."""
    return fuzz_settings(n, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much)


class Accepted(BaseException):
    """Raised by a stub where a command's heavy work would start: it accepted its input."""


def accept(*args, **kwargs):
    raise Accepted()


# ------------------------------------------------------------------------------------------------ values
INTS = ["-1", "0", "1", "2", "3", "\u0663", str(10**30), "2147483648", "1e308", "nan", "inf", "-inf", "", "text",
        "1e3"]
# thread counts: valid ones stay 1 (more threads only slow a shared 2-core CI machine down); 1025 is past the limit
THREAD_INTS = ["-1", "0", "1", "\u0661", "1025", str(10**30), "2147483648", "1e308", "nan", "inf", "-inf", "",
               "text", "1e3"]
FLOATS = ["-1", "-0", "0", "1e-300", "0.5", "1", "2", "4", "20", "300", "1e3", "1e308", "nan", "inf", "-inf", "",
          "text"]
IN_PATHS = ["@missing", "@dir", "@empty", "@random", "@blank"]
OUT_DIRS = ["@fresh", "@fresh_nested", "@fresh_unicode", "@a_file", "@under_file", "@readonly", "@blank"]
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")       # what argparse takes for a value, not an option


def as_int(text: str) -> Optional[int]:
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def as_float(text: str) -> Optional[float]:
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        return None
    try:
        return float(text)
    except ValueError:
        return None


#: an oracle's verdict on a valid value whose run may rightly end in exit status 3 ("simulation unstable"), e.g.
#: a MARTINI system left unminimised: valid input, but not judged as one that must succeed
MAY_BLOW_UP = "may blow up"

Oracle = Callable[[str, Dict[str, str]], Union[bool, None, str]]   # (value, all option values) -> valid?
#                                                                   None: either; MAY_BLOW_UP: valid, exit 0 or 3


def ints(low: int, high: Optional[int] = None) -> Oracle:
    def ok(text, ctx):
        v = as_int(text)
        return v is not None and v >= low and (high is None or v <= high)
    return ok


def floats(low: float, high: float = math.inf, low_open: bool = False, allow_inf: bool = False,
           sure_below: float = math.inf) -> Oracle:
    """Valid: a number in the range (finite unless ``allow_inf``); values above ``sure_below`` may fail at run
    time (exit 3 or a blow-up refused as input) and are not judged."""
    def ok(text, ctx):
        v = as_float(text)
        if v is None or math.isnan(v) or (math.isinf(v) and not allow_inf):
            return False
        if (v <= low if low_open else v < low) or v > high:
            return False
        return True if v <= sure_below else None
    return ok


def one_of(*valid: str) -> Oracle:
    return lambda text, ctx: text in valid


def tokens(**valid: Optional[bool]) -> Oracle:
    """Path tokens: those named are valid (True), not judged (None) or invalid (False); others invalid."""
    return lambda text, ctx: valid.get(text.lstrip("@"), False)


RANDOM_TEXT = "@text"                      # in a pool: random text (hypothesis st.text)


def choices(valid: Sequence[str]) -> List[str]:
    return list(valid) + [RANDOM_TEXT]


OUT_DIR_ORACLE = tokens(fresh=True, fresh_nested=True, fresh_unicode=True)


def path_values(*extra: str) -> List[str]:
    """The input-path pool (missing, a directory, empty, random bytes, '') and ``extra``."""
    return IN_PATHS + list(extra)


@dataclass
class Opt:
    """A fuzzed option: its value pool (strings, path tokens ``@...``, ``@text``) and the oracle. Half the
    draws come from the pool values the oracle accepts with the base argv, so valid runs are common."""

    name: str                              # "--steps", or "<pdb>" for a positional
    pool: Sequence[str]
    valid: Oracle

    @property
    def values(self) -> st.SearchStrategy:
        def draw(items):
            return st.one_of(*[st.text(max_size=8) if v == RANDOM_TEXT else st.just(v) for v in items])

        good = [v for v in self.pool if v != RANDOM_TEXT and self.valid(v, {}) is not False]
        return st.one_of(draw(good), draw(self.pool)) if good else draw(self.pool)


@dataclass
class Command:
    """A command under test: a valid argv (``base``), its fuzzed options, what its complete output is, the stubs
    that keep its heavy part short."""

    module: str                            # flashschnet.scripts.<module>, or a module's full name
    prog: str
    base: List[Tuple[str, Optional[str]]]  # the valid argv: (name, value); positionals "<x>", flags value None
    opts: List[Opt]
    required: List[str]                    # names whose removal must be refused
    markers: Callable[[Dict[str, str]], List[str]]     # files a complete output has
    complete: Callable[[Dict[str, str]], None] = lambda v: None   # more checks after status 0
    stubs: Callable[..., None] = lambda mp, ws: None
    duplicate: Optional[Tuple[str, str]] = None         # an option repeated by the "duplicate" mutation
    never: Callable[[Dict[str, str]], List[str]] = lambda v: []   # files no run may leave (temporaries)
    sub: List[str] = field(default_factory=list)        # subcommand


# ------------------------------------------------------------------------------------------------ runner
def invoke(cmd: Command, argv: List[str]) -> Tuple[object, str]:
    """main(argv) in-process: (exit status or "accepted", stderr)."""
    main = importlib.import_module(cmd.module if cmd.module.startswith("flashschnet.")
                                   else f"flashschnet.scripts.{cmd.module}").main
    err, out = io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(argv)
            except SystemExit as exc:            # argparse
                rc = exc.code
            except Accepted:
                rc = "accepted"
            except Exception:                    # reported below as a traceback on stderr
                import traceback

                traceback.print_exc(file=err)
                rc = "exception"
    finally:
        torch.set_num_threads(threads)
    return rc, err.getvalue()


def build_argv(cmd: Command, pairs: List[Tuple[str, Optional[str]]]) -> List[str]:
    argv = list(cmd.sub)
    argv += [v for n, v in pairs if n.startswith("<")]
    for n, v in pairs:
        if not n.startswith("<"):
            argv += [n] if v is None else [n, v]
    return argv


def run_case(cmd: Command, case, ws, mp) -> None:
    """Run one drawn ``case`` of ``cmd`` (in a fresh folder under the workspace ``ws``, stubs set with ``mp``) and
    check the properties above."""
    mutations, structural = case
    pairs = list(cmd.base)
    names = [n for n, _ in pairs]
    opts = {o.name: o for o in cmd.opts}
    for name, value in mutations:
        if value == "@off":                           # a flag switched off
            pairs = [(n, v) for n, v in pairs if n != name]
        elif name in names:
            pairs = [(n, (None if value == "@on" else value) if n == name else v) for n, v in pairs]
        else:
            pairs.append((name, None if value == "@on" else value))
    ctx = {n: (v if v is not None else "@on") for n, v in pairs}
    verdicts = [opts[n].valid(v, ctx) for n, v in mutations]
    expected: Union[bool, None, str] = (False if False in verdicts else None if None in verdicts else
                                        MAY_BLOW_UP if MAY_BLOW_UP in verdicts else True)
    if structural == "unknown":
        pairs.append(("--no-such-option", "1"))
        expected = False
    elif structural == "missing" and cmd.required:
        drop = cmd.required[len(mutations) % len(cmd.required)]
        pairs = [(n, v) for n, v in pairs if n != drop]
        expected = False
    elif structural == "duplicate" and cmd.duplicate and cmd.duplicate[0] not in dict(mutations):
        pairs.append(cmd.duplicate)                   # argparse: the last one wins; still valid

    example = Path(tempfile.mkdtemp(dir=ws.root, prefix="ex"))
    suffix = {"convert": ".pt", "benchmark": ".json"}.get(cmd.module, ".npz" if cmd.sub == ["md"] else "")
    resolved = [(n, ws.resolve(v, example, suffix if n in ("<output>", "--out") else "")) for n, v in pairs]
    values = {n: v for n, v in resolved}
    markers = [m for m in cmd.markers(values) if m]
    before = {m for m in markers if os.path.exists(m)}
    argv = build_argv(cmd, resolved)
    cmd.stubs(mp, ws)
    t0 = time.perf_counter()
    rc, err = invoke(cmd, argv)
    seconds = time.perf_counter() - t0

    where = f"{cmd.prog} {argv}: exit {rc}; stderr:\n{err}"
    assert "Traceback" not in err and rc != "exception", where
    lines = err.strip().splitlines()
    if expected is True:
        assert rc in (0, "accepted"), where
    elif expected == MAY_BLOW_UP:
        assert rc in (0, "accepted", 3), where
    elif expected is False:
        assert rc == 2, where
    if os.environ.get("FUZZ_CLI_LOG"):                      # what the fuzzer tried, for a look by hand
        with open(os.environ["FUZZ_CLI_LOG"], "a") as f:
            f.write(f"{cmd.prog} {' '.join(cmd.sub)}\t{case}\texpected={expected}\trc={rc}\t{seconds:.2f}s\t"
                    f"{lines[-1] if lines else ''}\n")
    if rc == 2:
        progs = (f"{cmd.prog}: error: ", f"{' '.join([cmd.prog] + cmd.sub)}: error: ")
        if lines and lines[-1].endswith("--help: the options)"):     # a command's usage error (subcommand: its prog)
            assert len(lines) == 1 and lines[0].startswith(progs), where
        elif lines and lines[0].startswith("usage:"):       # a maintainer tool's: argparse's usage + error form
            assert lines[-1].startswith(progs), where
            assert sum(l.startswith(progs) for l in lines) == 1, where
        else:
            assert lines and lines[-1].startswith(f"{cmd.prog}: error: "), where                                                # ours: PROG: lines, the last and only error one
            assert all(l.startswith(f"{cmd.prog}: ") for l in lines), where
            assert sum(": error:" in l for l in lines) == 1, where
        left = {m for m in markers if os.path.exists(m)} - before
        assert not left, f"{where}\nleft behind: {left}"
    elif rc == 3:
        assert lines[-1].startswith(f"{cmd.prog}: simulation unstable: "), where
    elif rc == 0:
        missing = [m for m in markers if not os.path.exists(m)]
        assert not missing, f"{where}\nmissing output: {missing}"
        cmd.complete(values)
    else:
        assert rc == "accepted", where
    stray = [p for p in cmd.never(values) if os.path.exists(p)]
    assert not stray, f"{where}\nleft behind: {stray}"
    shutil.rmtree(example, ignore_errors=True)


def cases(cmd: Command):
    """One or two (option, value) changes, plus maybe an unknown, repeated or missing option."""
    by_name = {o.name: o for o in cmd.opts}
    picks = st.lists(st.sampled_from(list(by_name)), min_size=1, max_size=2, unique=True)
    changes = picks.flatmap(lambda names: st.tuples(*[st.tuples(st.just(n), by_name[n].values) for n in names]))
    return st.tuples(changes, st.sampled_from([None, None, None, None, "unknown", "duplicate", "missing"]))
