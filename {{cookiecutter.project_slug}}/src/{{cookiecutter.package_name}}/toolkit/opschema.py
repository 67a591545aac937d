"""Check op-plugin schema files (op_plugin_functions.yaml) before a torch_npu build or graph mode does.

    python -m <package> opschema [--strict] [FILE ...]

Errors (exit 1) break torch_npu's code generation: YAML that does not parse, unknown sections,
entry keys or gen_opapi keys, a `func` that ATen's schema parser (torchgen, as the build uses)
rejects, version fields naming versions outside `all_version`, a gen_opapi output whose size or
dtype names no argument, an op listed twice for the same versions. Warnings break graph mode for
custom ops (TorchAir's rules): an in-place kernel with no argument marked (a!), a mutated input
returned, Tensor inputs after scalars; --strict makes them errors. Each finding reads
FILE:LINE: <op name>: message. With no FILE, this project's op_plugin_functions.yaml is checked.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from torchgen.model import FunctionSchema, SchemaKind

DEFAULT_FILE = files(__package__.rpartition(".")[0]) / "op_plugin_functions.yaml"
"""This project's yaml: it sits beside model.py, in your files, not in the toolkit's folder."""
ENTRY_SECTIONS = frozenset(
    {"official", "custom", "custom_autograd", "autograd", "symint", "quant", "tocpu", "unsupported"}
)
SECTIONS = ENTRY_SECTIONS | {"all_version"}
# Sections of custom (non-ATen) ops: graph mode's rules for custom ops apply to these.
CUSTOM_SECTIONS = frozenset({"custom", "custom_autograd"})
VERSION_KEYS = ("acl_op", "op_api", "dvm", "sparse", "internal_format_opapi", "exposed")
ENTRY_KEYS = frozenset(
    {"func", "gen_opapi", "tags", "device_check", "dispatch", "structured", "structured_delegate"}
    | {"use_const_ref_for_mutable_tensors", *VERSION_KEYS}
)
# gen_opapi keys that are not outputs; every other mapping under gen_opapi describes one.
NOT_OUTPUTS = frozenset(
    {"exec", "new_params", "structured_inherit", "cpu_scalar_h2d", "cpu_scalar_op"}
    | {"integral_identity_tensor"}
)
# Types that op-plugin still lists for older torch releases but this torch's torchgen dropped.
RETIRED_TYPES = {"Dimname": "str"}
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    op: str
    message: str
    graph_mode: bool = False
    """A graph-mode rule (a warning unless --strict), not a format error."""

    def __str__(self) -> str:
        kind = "warning: " if self.graph_mode else ""
        return f"{self.file}:{self.line}: {self.op}: {kind}{self.message}"


def parse_schema(func: str) -> FunctionSchema | str:
    """The schema as torchgen (torch_npu's code generator) parses it, or why it can't."""
    try:
        return FunctionSchema.parse(func)
    except (AssertionError, KeyError, RuntimeError, ValueError) as error:
        modern = func
        for retired, current in RETIRED_TYPES.items():
            modern = re.sub(rf"\b{retired}\b", current, modern)
        if modern != func:
            return parse_schema(modern)
        return str(error).splitlines()[0] if str(error) else type(error).__name__


class LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping key, and keys given twice."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.key_lines: dict[int, dict[Any, int]] = {}
        self.duplicate_keys: list[tuple[int, Any]] = []

    def construct_line_mapping(self, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
        mapping: dict[Any, Any] = {}
        yield mapping  # first, so that recursive structures resolve, as PyYAML's own does
        mapping.update(self.construct_mapping(node))
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node)
            if key in lines:
                self.duplicate_keys.append((key_node.start_mark.line + 1, key))
            lines[key] = key_node.start_mark.line + 1
        self.key_lines[id(mapping)] = lines


LineLoader.add_constructor("tag:yaml.org,2002:map", LineLoader.construct_line_mapping)


class Checker:
    """The findings for one file."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.findings: list[Finding] = []
        self.key_lines: dict[int, dict[Any, int]] = {}
        self.all_versions: list[str] = []

    def report(self, line: int, op: str, message: str, graph_mode: bool = False) -> None:
        self.findings.append(Finding(self.file, line, op, message, graph_mode))

    def line_of(self, mapping: dict[Any, Any], key: Any) -> int:
        # Every mapping of the document, and so every key looked up, went through LineLoader.
        return self.key_lines[id(mapping)][key]

    def error_line(self, error: yaml.YAMLError) -> int:
        """Where the broken construct starts (an unclosed [ ...), else where parsing gave up; a
        character YAML refuses (a ReaderError) has only its offset in the text."""
        mark = getattr(error, "context_mark", None) or getattr(error, "problem_mark", None)
        if mark:
            return mark.line + 1
        return self.text.count("\n", 0, getattr(error, "position", 0)) + 1

    def run(self) -> list[Finding]:
        try:
            loader = LineLoader(self.text)  # reads the whole text first: a bad character fails here
            try:
                document = loader.get_single_data()
            finally:
                loader.dispose()
        except yaml.YAMLError as error:
            self.report(
                self.error_line(error), "<yaml>", f"does not parse: {error}".splitlines()[0]
            )
            return self.findings
        self.key_lines = loader.key_lines
        for line, key in loader.duplicate_keys:
            self.report(line, "<yaml>", f"key {key!r} given twice: YAML keeps only the last")
        if isinstance(document, dict):
            self.check_sections(document)
        else:
            self.report(1, "<yaml>", "is not a mapping of sections (all_version:, custom:, ...)")
        return sorted(self.findings, key=lambda finding: finding.line)

    def check_sections(self, document: dict[Any, Any]) -> None:
        for section in document:
            if section not in SECTIONS:
                known = ", ".join(sorted(SECTIONS))
                line = self.line_of(document, section)
                self.report(line, str(section), f"unknown section; known: {known}")
        versions = document.get("all_version")
        self.all_versions = [str(version) for version in versions or []]
        for section in sorted(ENTRY_SECTIONS & document.keys()):
            seen: dict[str, list[tuple[int, set[str]]]] = {}
            for entry in document[section] or []:
                if isinstance(entry, dict) and isinstance(entry.get("func"), str):
                    self.check_entry(section, entry, seen)
                else:
                    line = self.line_of(document, section)
                    self.report(line, section, "has an entry without a `func:` string")

    def check_entry(
        self, section: str, entry: dict[Any, Any], seen: dict[str, list[tuple[int, set[str]]]]
    ) -> None:
        line = self.line_of(entry, "func")
        name = entry["func"].split("(")[0].strip()
        for key in entry:
            if key not in ENTRY_KEYS:
                self.report(self.line_of(entry, key), name, f"unknown key {key!r}")
        versions = set()
        for key in VERSION_KEYS:
            if key in entry:
                versions |= self.versions(entry, key, name)
        versions = versions or set(self.all_versions)
        # The same op may be listed again for other versions (a changed schema), not the same ones.
        for first_line, first_versions in seen.get(name, []):
            if versions & first_versions:
                self.report(
                    line, name, f"listed twice for the same versions (first at line {first_line})"
                )
                break
        seen.setdefault(name, []).append((line, versions))
        schema = parse_schema(entry["func"])
        if isinstance(schema, str):
            self.report(line, name, f"func is not a valid schema: {schema}")
            return
        gen_opapi = entry.get("gen_opapi")
        if isinstance(gen_opapi, dict):
            self.check_gen_opapi(gen_opapi, schema, name)
        if section in CUSTOM_SECTIONS:
            self.check_graph_mode(gen_opapi, schema, name, line)

    def versions(self, entry: dict[Any, Any], key: str, name: str) -> set[str]:
        """The versions a version field names, reporting any outside all_version."""
        value, line = entry[key], self.line_of(entry, key)
        if value == "all_version" or isinstance(value, bool):
            return set(self.all_versions)
        if isinstance(value, list):
            if len(value) != 2:
                self.report(line, name, f"{key}: a version range is [first, last], got {value}")
                return set()
            first, last = (str(bound) for bound in value)
            named = [first] if last == "newest" else [first, last]
        else:
            named = [part.strip() for part in str(value).split(",")]
        unknown = [version for version in named if version not in self.all_versions]
        for version in unknown:
            self.report(line, name, f"{key}: {version} is not in all_version")
        if unknown:
            return set()
        if isinstance(value, list):
            start = self.all_versions.index(first)
            stop = len(self.all_versions) if last == "newest" else self.all_versions.index(last) + 1
            return set(self.all_versions[start:stop])
        return set(named)

    def check_gen_opapi(self, gen_opapi: dict[Any, Any], schema: FunctionSchema, name: str) -> None:
        new_params = gen_opapi.get("new_params")
        known = {argument.name for argument in schema.arguments.flat_all}
        known |= set(new_params) if isinstance(new_params, dict) else set()
        for key, output in gen_opapi.items():
            if key in NOT_OUTPUTS:
                continue
            if not isinstance(output, dict):
                # A misspelt key (exe: for exec:) is neither an output nor a key the generator reads.
                others = ", ".join(sorted(NOT_OUTPUTS))
                message = f"gen_opapi.{key}: unknown key; an output maps size: and dtype:, others are {others}"
                self.report(self.line_of(gen_opapi, key), name, message)
                continue
            for field in ("size", "dtype"):
                value = output.get(field)
                # A bare name must be an argument (or a new_params local); anything else is C++.
                if isinstance(value, str) and IDENTIFIER.fullmatch(value) and value not in known:
                    message = f"gen_opapi.{key}.{field}: {value} is not an argument of the op"
                    self.report(self.line_of(output, field), name, message)

    def check_graph_mode(
        self, gen_opapi: Any, schema: FunctionSchema, name: str, line: int
    ) -> None:
        def warn(message: str) -> None:
            self.report(line, name, message, graph_mode=True)

        arguments = schema.arguments.flat_all
        marked = [
            argument
            for argument in arguments
            if argument.annotation and argument.annotation.is_write
        ]
        allocates = isinstance(gen_opapi, dict) and any(
            key not in NOT_OUTPUTS and isinstance(value, dict) for key, value in gen_opapi.items()
        )
        if isinstance(gen_opapi, dict) and not allocates and schema.returns and not marked:
            warn(
                "gen_opapi allocates no output, so the kernel writes into an input, but none is marked (a!)"
            )
        if schema.kind() != SchemaKind.out:
            for returned in schema.returns:
                if returned.annotation and returned.annotation.is_write:
                    warn(
                        f"returns a mutated input ({returned}): automatic "
                        "functionalization in graph mode needs in-place custom ops to return none"
                    )
        scalar = None
        late = []
        for argument in schema.arguments.flat_non_out:
            if not argument.type.is_tensor_like():
                scalar = scalar or argument.name
            elif scalar:
                late.append(argument.name)
        if late:
            inputs = (
                f"input {late[0]} comes" if len(late) == 1 else f"inputs {', '.join(late)} come"
            )
            warn(f"Tensor {inputs} after the scalar {scalar}: put Tensors first")


def schema() -> str:
    """The op's `func` from this project's op_plugin_functions.yaml, its one `custom` entry."""
    (entry,) = yaml.safe_load(DEFAULT_FILE.read_text())["custom"]
    return entry["func"]


def check(path: Path | Any) -> list[Finding]:
    """Every finding for one file, in line order."""
    return Checker(str(path), path.read_text()).run()


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="yaml files (default: this project's)")
    parser.add_argument("--strict", action="store_true", help="treat graph-mode warnings as errors")
    arguments = parser.parse_args(argv)
    for path in arguments.files:
        if not path.is_file():
            parser.error(f"{path}: no such file; give the path of an op_plugin_functions.yaml")
    findings = [finding for path in arguments.files or [DEFAULT_FILE] for finding in check(path)]
    for finding in findings:
        print(finding)
    errors = [finding for finding in findings if arguments.strict or not finding.graph_mode]
    print(f"{len(errors)} error(s), {len(findings) - len(errors)} warning(s)", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
