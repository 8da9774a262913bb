"""Java `.properties` files as `java.util.Properties.store` writes them."""

from __future__ import annotations

import re
from datetime import datetime, timezone

_ESCAPES = {"\\": "\\\\", ":": "\\:", "=": "\\=", "\n": "\\n", "\r": "\\r", "\t": "\\t", "#": "\\#", "!": "\\!"}


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            units = ch.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))
        else:
            out.append(ch)
    return "".join(out)


def dumps(props: dict[str, str]) -> str:
    """Serialise with Java's escaping and Hudi's two comment lines, one key per line."""
    now = datetime.now(timezone.utc)
    lines = [
        "#Properties saved on " + now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        "#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"),
    ]
    lines.extend(f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items())
    return "\n".join(lines) + "\n"


def _unescape(text: str) -> str:
    if "\\" not in text:  # the common case, and every table open reads hoodie.properties
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    # Java writes characters beyond the BMP as two \\u escapes (a surrogate pair).
    return "".join(out).encode("utf-16-be", "surrogatepass").decode("utf-16-be")


_KEY_END = re.compile(r"\\.|[=: \t]", re.DOTALL)  # an escaped pair (skipped), or the first separator


def _split(line: str) -> tuple[str, str]:
    for found in _KEY_END.finditer(line):
        if found.group()[0] != "\\":
            i = found.start()
            key = line[:i]
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t")
            return key, rest
    return line, ""


def loads(text: str) -> dict[str, str]:
    """Parse a properties file (comments, escapes and continuation lines)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        props[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, value = _split(logical)
        props[_unescape(key)] = _unescape(value)
    return props
