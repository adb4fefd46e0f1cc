"""A Python source's statements as one token stream, the same on every supported Python (3.10-3.13): what the code
fingerprint of a record hashes (:mod:`umlkit.experiments.runs.fingerprint`).

Why not ``tokenize`` as it is: since Python 3.12 (PEP 701) ``tokenize`` splits an f-string into ``FSTRING_START``,
``FSTRING_MIDDLE``, the replacement fields' own tokens and ``FSTRING_END``, where 3.10 and 3.11 give the whole
literal as one ``STRING``. Hashing the pieces made every committed record (fingerprinted under 3.11) read as stale
under 3.12 and 3.13, Colab's Python. Here an f-string is re-joined into the source text it spans, so the stream is
the 3.10/3.11 one on every version; a test hashes the whole package under every interpreter found on the machine
and requires one value (``tests/experiments/test_fingerprint.py``). Comments, blank lines and docstrings are left
out (a documentation edit changes no record); any change of a statement changes the stream.

Standard library only, so that another interpreter can load this file by its path without the package's
dependencies. No library normalises source this way: ``ast.dump`` would also do, but differs between versions in
its own ways (new node fields, ``type_params`` from 3.12) and would change every stored fingerprint.
"""
from __future__ import annotations

import ast
import io
import tokenize

__all__ = ["docstring_lines", "normalised_tokens"]

# tokenize's f-string tokens on 3.12+ (absent before, where an f-string is one STRING token)
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_DROP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def docstring_lines(source: str) -> set[int]:
    """Line numbers of module/class/function docstrings."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _span(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from ``start`` to ``end`` ((row, column) as tokenize gives them, rows from 1)."""
    (r0, c0), (r1, c1) = start, end
    if r0 == r1:
        return lines[r0 - 1][c0:c1]
    return lines[r0 - 1][c0:] + "".join(lines[r0:r1 - 1]) + lines[r1 - 1][:c1]


def _tokens(source: str):
    """(type, string, start row) of each token, an f-string (3.12+: its pieces and nested fields) as one STRING
    token holding the text it spans, as tokenize gives it on 3.10 and 3.11."""
    lines = source.splitlines(keepends=True)
    depth, opened = 0, None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if _FSTRING_START is not None and tok.type == _FSTRING_START:
            if depth == 0:
                opened = tok.start
            depth += 1
        elif depth:
            if tok.type == _FSTRING_END:
                depth -= 1
                if depth == 0:
                    yield tokenize.STRING, _span(lines, opened, tok.end), opened[0]
        else:
            yield tok.type, tok.string, tok.start[0]


def normalised_tokens(source: str) -> str:
    """The source's tokens without comments, blank lines and docstrings, one per line (layout-independent)."""
    skip = docstring_lines(source)
    out = []
    for kind, text, row in _tokens(source):
        if kind in _DROP or (kind == tokenize.STRING and row in skip):
            continue
        if kind == tokenize.NEWLINE and out and out[-1] == "\n":
            continue  # the NEWLINE that ended a dropped docstring
        out.append("\n" if kind == tokenize.NEWLINE else text)
    return " ".join(out)
