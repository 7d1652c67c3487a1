"""``docs/reference/cli.md``: every command and flag of ``waggle``, read from its argparse parser.

Commands whose name starts with ``_`` are internal (a worker process of ``serve --workers``) and left out, as
``waggle --help`` leaves them out. Each command shows its examples and docs pages (``waggle.cli.EXAMPLES`` and
``DOCS``; each page linked by its title in mkdocs.yml's nav), then a table of its flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from waggle.cli import DOCS, EXAMPLES, SUMMARY, build_parser
from waggle.docs import generated, link, titles


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of every public subcommand, in ``waggle --help``'s order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not name.startswith("_"):
                    yield name, helps.get(name, ""), sub


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "-"
    if action.choices is not None:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    return f"`{action.metavar or action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    if action.required:
        return "(required)"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return "-"
    return f"`{action.default}`"


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    exclusive = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    rows = ["| Flag | Value | Default | Meaning |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        meaning = " ".join((action.help or "").split())
        group = exclusive.get(id(action))
        if group is not None:
            others = [o.option_strings[0] for o in group._group_actions if o is not action]
            meaning += f" (not with {', '.join(f'`{o}`' for o in others)})"
        flags = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
        rows.append(f"| {flags} | {_value(action)} | {_default(action)} | {meaning.replace('|', chr(92) + '|')} |")
    return rows


def _about(command: str, what: str, found: dict[str, str]) -> list[str]:
    examples = ["```console", *(f"$ {line}" for line in EXAMPLES[command]), "```"]
    docs = ", ".join(link(path, "reference", found) for path in DOCS[command])
    return [f"{what[:1].upper()}{what[1:]}.", "", *examples, "", f"Docs: {docs}.", ""]


def render() -> str:
    parser = build_parser()
    commands = list(_commands(parser))
    found = titles()
    lines = ["# CLI reference", "", generated("waggle/cli.py"), "",
             "`waggle --help` and `waggle COMMAND --help` print the same, each led by an example.", "",
             "## `waggle`", "", *_about("waggle", SUMMARY, found),
             "| Command | What it does |", "|---|---|",
             *(f"| [`{name}`](#waggle-{name}) | {what} |" for name, what, _ in commands), "",
             *_flags(parser), ""]
    for name, what, sub in commands:
        lines += [f"## `waggle {name}`", "", *_about(name, what, found), *_flags(sub), ""]
    return "\n".join(lines)
