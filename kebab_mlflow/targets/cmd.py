"""``--target cmd:…``: run a command per query (``{query}``, ``{k}``, ``{ask}`` placeholders)
and read its stdout as the reply."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

from kebab_mlflow.errors import TargetError
from kebab_mlflow.records import Answer, Hit, VersionSnapshot
from kebab_mlflow.targets.base import Target
from kebab_mlflow.targets.reply import ReplyError, decode_json, parse_reply, snippet
from kebab_mlflow.targets.spec import TargetOptions, parse_options, snapshot, split_options

PLACEHOLDER = re.compile(r"\{(query|k|ask)\}")


class CmdTarget(Target):
    """Run a command per query without a shell; JSON reply on stdout."""

    kind = "cmd"

    def __init__(self, spec: str, argv: list[str], options: TargetOptions,
                 versions: VersionSnapshot, concurrency: int):
        super().__init__(spec, versions, concurrency)
        self.argv = argv
        self.options = options
        self.stdin_request = not any("{query}" in a for a in argv)

    def command(self, text: str, k: int, ask: bool) -> list[str]:
        """The template with ``{query}``, ``{k}``, ``{ask}`` replaced inside each argument, in
        one pass: a query stays inside its one argument and is never re-substituted."""
        values = {"query": text, "k": str(k), "ask": "true" if ask else "false"}
        return [PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in self.argv]

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        argv = self.command(text, k, ask)
        stdin = (json.dumps({"query": text, "k": k, "ask": ask}).encode("utf-8")
                 if self.stdin_request else None)
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True,  # noqa: S603
                                  timeout=self.options.timeout_s,
                                  stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ReplyError(f"timed out after {self.options.timeout_s:g} s (command killed)"
                             ) from None
        except OSError as exc:
            raise ReplyError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            raise ReplyError(f"exit status {proc.returncode}; stderr: {snippet(proc.stderr)}")
        return parse_reply(decode_json(proc.stdout, "stdout"), ask)


def load_cmd(spec: str, concurrency: int) -> CmdTarget:
    template, raw = split_options(spec[len("cmd:"):], "cmd", strict=False)
    options = parse_options(raw, spec)
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise TargetError(f"--target {spec!r}: cannot split the command template: {exc}"
                          ) from None
    if not argv:
        raise TargetError(f"--target {spec!r}: the command template is empty")
    if PLACEHOLDER.search(argv[0]):
        raise TargetError(f"--target {spec!r}: the program name may not contain a placeholder")
    if shutil.which(argv[0]) is None:
        raise TargetError(f"--target {spec!r}: program {argv[0]!r} not found (not on PATH "
                          "and not an executable file)")
    return CmdTarget(spec, argv, options, snapshot({}, options.versions, spec,
                                                   "command targets report versions through "
                                                   "the spec only"), concurrency)
