"""`bimu --help` documents everything: every option of every (sub)command has a help text."""

import argparse

from bimu.cli import REPRODUCTIONS, build_parser, main


def _undocumented(parser: argparse.ArgumentParser, prefix: str = "bimu") -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _undocumented(sub, f"{prefix} {name}")
            continue
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
            missing.append(f"{prefix} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_has_help():
    assert _undocumented(build_parser()) == []


def test_reproduce_dispatches_to_the_named_command(monkeypatch):
    calls = []
    import bimu.cli as cli

    real_main = cli.main

    def spy(argv=None):
        calls.append(list(argv))
        if argv and argv[0] == "reproduce":
            return real_main(argv)
        return 0

    monkeypatch.setattr(cli, "main", spy)
    assert spy(["reproduce", "compute-cost", "--k", "2"]) == 0
    assert calls[-1] == [REPRODUCTIONS["compute-cost"], "--k", "2"]
    assert main is real_main


def test_python_dash_m_bimu_is_the_same_command_line():
    import subprocess
    import sys

    import bimu

    done = subprocess.run([sys.executable, "-m", "bimu", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert bimu.__version__ in done.stdout
    bad = subprocess.run([sys.executable, "-m", "bimu", "no-such-command"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [prefix + (name,)] + _commands(sub, prefix + (name,))
    return out


def test_every_command_prints_its_help(capsys):
    commands = _commands(build_parser())
    assert ("run",) in commands and ("data", "fetch") in commands
    failed = []
    for command in commands:
        try:
            main([*command, "--help"])
        except SystemExit as e:
            out = capsys.readouterr().out
            if e.code != 0 or f"usage: bimu {' '.join(command)}" not in " ".join(out.split()):
                failed.append((command, e.code))
        else:
            failed.append((command, "no exit"))
    assert failed == []


def test_the_command_line_starts_without_torch_and_the_lazy_packages_still_export_their_names():
    """Building the whole parser (what ``bimu --help`` and every ``bimu X --help`` do) imports neither
    torch nor the compiled engine; the package names that need them load on first use."""
    import subprocess
    import sys

    code = ("import sys, bimu.cli; bimu.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'bimu.engine', 'bimu.methods', 'optuna') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import bimu.active
    import bimu.edge
    import bimu.tune
    from bimu.active import ActiveLearner
    from bimu.active.learner import ActiveLearner as defined

    assert ActiveLearner is defined and "ActiveLearner" in vars(bimu.active)
    assert {"pack", "export_run"} <= set(dir(bimu.edge)) and callable(bimu.tune.run_tune)
    try:
        bimu.edge.nothing_here
    except AttributeError as e:
        assert str(e) == "module 'bimu.edge' has no attribute 'nothing_here'"
    else:
        raise AssertionError("no AttributeError")
