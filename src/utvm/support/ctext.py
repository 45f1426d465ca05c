"""Text from models (tensor names...) embedded in generated C: string literals and comments that always compile
under `-std=c99 -Wall -Wextra -Werror -pedantic`, whatever the name holds (quotes, backslashes, newlines,
trigraphs such as `??/`, comment delimiters, non-ASCII)."""

from __future__ import annotations

import re


def c_string(text: str) -> str:
    """`text` as the body of a C string literal: its UTF-8 bytes, with quotes, backslashes, '?' (trigraphs)
    and every byte outside printable ASCII escaped (octal escapes are at most 3 digits: never ambiguous)."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def c_comment(text: str) -> str:
    """`text` made safe inside a one-line /* */ comment: no comment delimiters, trigraphs or control chars."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return re.sub(r"\?(?=\?)", "? ", text.replace("*/", "* /").replace("/*", "/ *"))
