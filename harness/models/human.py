"""``human:`` — a person at the terminal, in a seat a model would fill.

A human seat answers no JSON schema: the format's human agent
(``harness.agents.human``) talks to the person through ``HumanConsole``, a
``prompt_toolkit`` prompt. ``complete`` is never the path, so it fails
loudly if a format without human seats reaches it. Tests drive the console
with prompt_toolkit's pipe input.
"""

from __future__ import annotations

import sys
from typing import Any

from harness.models.base import Completion, ModelConfigError, ModelRequest


class HumanConsole:
    """Lines in from a person, text out to them: a prompt_toolkit session, or
    plain ``input()`` when stdin is not a terminal (piped into a script)."""

    def __init__(self, input: Any = None, output: Any = None) -> None:
        self.input, self.output = input, output
        self._session: Any = None

    def _interactive(self) -> bool:
        return self.input is not None or sys.stdin.isatty()

    def show(self, text: str) -> None:
        if self.output is not None or self._interactive():
            from prompt_toolkit import print_formatted_text

            print_formatted_text(text, output=self.output)
        else:
            print(text, flush=True)

    def read(self, prompt: str) -> str | None:
        """One line from the person; None when they are gone (end of input, Ctrl-C, Ctrl-D)."""
        try:
            if not self._interactive():
                return input(prompt)
            if self._session is None:
                from prompt_toolkit import PromptSession

                self._session = PromptSession(input=self.input, output=self.output)
            return str(self._session.prompt(prompt))
        except (EOFError, KeyboardInterrupt):
            return None


class HumanModel:
    """The model object of a ``human:<name>`` seat: a console, no weights."""

    def __init__(self, spec: str = "human:you", console: HumanConsole | None = None) -> None:
        self.spec = spec
        self.console = console or HumanConsole()

    def model_files(self) -> dict[str, str]:
        return {}

    def complete(self, request: ModelRequest) -> Completion:
        role = request.tags.get("role", "?")
        raise ModelConfigError(
            f"{self.spec}: a person cannot answer the {role} call of this format (chat mode: grounded, drift)"
        )
