"""A workflow definition's YAML text → a JSON tree with the position of every node (§3.2).

ruamel.yaml's parser turns the text into events; this module builds the tree from those
events itself, so nothing ever constructs an object from a tag, and it resolves plain
scalars by the YAML 1.2 **core** schema exactly (`on`, `yes`, `off` stay strings; only
`true`/`false` in their three spellings are booleans). ruamel's own resolver is not used: it
also reads `1_000` as an int and dates as timestamps, which the core schema does not.

Refused, each with the line and column (1-based) of the offending node: a syntax error, more
than one document, anchors and aliases, explicit tags, duplicate keys, keys that are not
strings, a root that is not a mapping, integers outside 64 bits, `.inf`/`.nan` (not JSON),
and nesting deeper than `YAML_MAX_DEPTH`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from buzz.workflows.limits import INT64_MAX, INT64_MIN, YAML_MAX_DEPTH

Path = tuple[str | int, ...]

# YAML 1.2.2 §10.3.2, the core schema's tag resolution of plain scalars.
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT10 = re.compile(r"[-+]?[0-9]+\Z")
_INT8 = re.compile(r"0o[0-7]+\Z")
_INT16 = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_FLOAT_SPECIAL = re.compile(r"(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)\Z")


@dataclass(frozen=True)
class Mark:
    """A 1-based position in the YAML text."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


class YamlError(ValueError):
    """The text is not a definition-shaped YAML document; `str()` is the `<detail>` of §3.2."""

    def __init__(self, message: str, mark: Mark | None) -> None:
        super().__init__(f"{message} at {mark}" if mark else message)
        self.message = message
        self.mark = mark


@dataclass
class Document:
    """The JSON tree of a definition and where each of its nodes sits in the text.

    `marks[path]` is the position of the value at `path` (`("steps", 0, "id")`); `key_marks`
    the position of the key that names it. Paths of mapping values end in the key, of sequence
    items in the index.
    """

    value: dict[str, Any]
    marks: dict[Path, Mark] = field(default_factory=dict)
    key_marks: dict[Path, Mark] = field(default_factory=dict)

    def mark(self, path: Path) -> Mark | None:
        """The position of `path`, or of its nearest ancestor that exists."""
        while True:
            found = self.marks.get(path)
            if found is not None or not path:
                return found
            path = path[:-1]


def _mark(event: ev.Event) -> Mark | None:
    m = event.start_mark
    return Mark(m.line + 1, m.column + 1) if m is not None else None


def resolve_plain(text: str, mark: Mark | None) -> Any:
    """A plain (unquoted) scalar's value under the YAML 1.2 core schema."""
    if _NULL.match(text):
        return None
    if text in _BOOL:
        return _BOOL[text]
    number: int | None = None
    if _INT10.match(text):
        number = int(text, 10)
    elif _INT8.match(text):
        number = int(text[2:], 8)
    elif _INT16.match(text):
        number = int(text[2:], 16)
    if number is not None:
        if not INT64_MIN <= number <= INT64_MAX:
            raise YamlError("integer outside the signed 64-bit range", mark)
        return number
    if _FLOAT_SPECIAL.match(text):
        raise YamlError(f"{text} is not a JSON number", mark)
    if _FLOAT.match(text):
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise YamlError("float out of range", mark)
        return value
    return text


def _scalar(event: ev.ScalarEvent) -> Any:
    plain = event.implicit[0] and event.style is None
    return resolve_plain(event.value, _mark(event)) if plain else event.value


class _Builder:
    """Folds the event stream into a tree; one frame per open mapping or sequence."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.stack: list[tuple[Path, dict[str, Any] | list[Any], list[Any]]] = []
        self.root: Any = None
        self.done = False

    def _place(self, value: Any, event: ev.Event) -> Path | None:
        """Put `value` in the open container; returns its path (None while it is a key)."""
        if not self.stack:
            if not isinstance(value, dict):
                raise YamlError("the document must be a mapping", _mark(event))
            self.root = value
            self.doc.marks[()] = _mark(event) or Mark(1, 1)
            return ()
        path, container, pending = self.stack[-1]
        if isinstance(container, list):
            child = (*path, len(container))
            container.append(value)
            self.doc.marks[child] = _mark(event) or Mark(1, 1)
            return child
        if not pending:
            if not isinstance(value, str):
                raise YamlError("mapping keys must be strings", _mark(event))
            if value in container:
                raise YamlError(f"duplicate key {value!r}", _mark(event))
            pending.append((value, _mark(event)))
            return None
        key, key_mark = pending.pop()
        container[key] = value
        child = (*path, key)
        self.doc.marks[child] = _mark(event) or Mark(1, 1)
        if key_mark is not None:
            self.doc.key_marks[child] = key_mark
        return child

    def feed(self, event: ev.Event) -> None:
        if isinstance(event, ev.AliasEvent):
            raise YamlError("aliases are not allowed", _mark(event))
        if isinstance(event, ev.NodeEvent) and event.anchor is not None:
            raise YamlError("anchors are not allowed", _mark(event))
        if isinstance(event, ev.NodeEvent) and getattr(event, "tag", None) is not None:
            raise YamlError(f"explicit tags are not allowed ({event.tag})", _mark(event))
        if isinstance(event, ev.ScalarEvent):
            self._place(_scalar(event), event)
        elif isinstance(event, ev.MappingStartEvent | ev.SequenceStartEvent):
            if self.stack and not isinstance(self.stack[-1][1], list) and not self.stack[-1][2]:
                raise YamlError("mapping keys must be strings", _mark(event))
            if len(self.stack) >= YAML_MAX_DEPTH:
                raise YamlError(f"nesting deeper than {YAML_MAX_DEPTH} levels", _mark(event))
            container: dict[str, Any] | list[Any] = {} if isinstance(event, ev.MappingStartEvent) else []
            path = self._place(container, event)
            assert path is not None
            self.stack.append((path, container, []))
        elif isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
            self.stack.pop()


def load(text: str) -> Document:
    """Parse a definition's YAML text. Raises YamlError naming the line and column."""
    doc = Document({})
    builder = _Builder(doc)
    documents = 0
    try:
        for event in YAML(typ="safe", pure=True).parse(text):
            if isinstance(event, ev.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise YamlError("more than one YAML document", _mark(event))
            elif isinstance(event, ev.DocumentEndEvent):
                builder.done = True
            else:
                builder.feed(event)
    except MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        where = Mark(m.line + 1, m.column + 1) if m is not None else None
        raise YamlError(" ".join(filter(None, [exc.context, exc.problem])) or "syntax error", where) from None
    except YAMLError as exc:
        raise YamlError(str(exc).splitlines()[0] if str(exc) else "syntax error", None) from None
    if builder.root is None:
        raise YamlError("the document must be a mapping", Mark(1, 1))
    doc.value = builder.root
    return doc
