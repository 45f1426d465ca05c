"""Text from outside utvm (tensor, op and custom-op names from a model, fields of a tuning log, lines of a
user's file) made safe to print on a terminal.

A model or a log is untrusted input: a name may hold an escape sequence that clears the screen or recolours
the text, a carriage return that overwrites a table row, a newline that splits a one-line error in two, or a
bidirectional control that reorders what the reader sees. `shown(text)` keeps every printable character as
it is and writes every other one as a Python-style escape (`\\x1b`, `\\n`, `\\u202e`), so what reaches the
terminal is exactly what the file holds, one line, nothing executed. Every string that did not come from
utvm itself passes through it on its way to stdout or stderr (tables, progress lines, error messages).
"""

from __future__ import annotations

import unicodedata

#: Unicode categories printed as escapes: controls (C0, C1, DEL), format characters (bidi overrides and
#: isolates, zero-width joiners), line and paragraph separators, surrogates, private use and unassigned.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: object) -> str:
    """`str(text)` with every character a terminal would act on (rather than show) written as an escape.
    Backslashes are kept as they are: the result is for a reader, not for parsing back."""
    s = str(text)
    if s.isascii() and s.isprintable():
        return s
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in s)
