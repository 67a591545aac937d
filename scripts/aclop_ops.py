"""Write the toolkit's table of torch_npu operators that run on the aclop path alone.

aclgraph capture refuses aclop operators ("Cannot run aclop operators during NPU graph capture").
torch_npu's own operators (torch.ops.npu.npu_*) are declared under `custom:` in op-plugin's
op_plugin/config/op_plugin_functions.yaml, each with the torch versions it has an `acl_op:` kernel
for and those it has an `op_api:` (aclnn) kernel for. One whose acl_op versions cover a torch
version and whose op_api versions do not is aclop-only there: op-plugin's codegen gives it no
other kernel to call. This reads that file with op-plugin's own rules for a version field
(torchnpugen/op_codegen_utils.py, get_version()) and writes the table, for every torch version
the template's torch_npu releases pin (cookiecutter.json), as a plain Python module in the
generated project's toolkit. It fetches nothing: the module's docstring and the README say how
to get the file.

    python scripts/aclop_ops.py functions.yaml --commit <40-hex commit> --date <YYYY-MM-DD>
    python scripts/aclop_ops.py functions.yaml --commit ... --date ... --check

Standard library and PyYAML only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import string
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

TEMPLATE = Path(__file__).resolve().parents[1]
PACKAGE = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}"
MODULE = PACKAGE / "toolkit" / "aclop_ops.py"
FUNCTIONS_PATH = "op_plugin/config/op_plugin_functions.yaml"
# Where op-plugin is developed, and its mirror, which the clone command uses (the same commits).
ORIGIN = "https://gitcode.com/Ascend/op-plugin"
REPOSITORY = "https://github.com/Ascend/op-plugin"
COMMIT = re.compile(r"[0-9a-f]{40}")
TORCH_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


class FunctionsError(ValueError):
    """op_plugin_functions.yaml holds what op-plugin's codegen cannot read, or not the version asked."""


def minor_of(version: str) -> str:
    """The minor version, "2.13", of "2.13", "2.13.0" or op-plugin's "v2.13"."""
    match = TORCH_VERSION.fullmatch(version)
    if match is None:
        raise FunctionsError(f"{version!r} is no torch version (2.13, 2.13.0)")
    return f"{match[1]}.{match[2]}"


def version_key(minor: str) -> tuple[int, ...]:
    """A minor version's place in release order: 2.9 before 2.10."""
    return tuple(int(number) for number in minor.split("."))


def template_torch_versions(cookiecutter_json: Path = TEMPLATE / "cookiecutter.json") -> list[str]:
    """The torch minor versions that the template's torch_npu releases pin, in release order."""
    releases = json.loads(cookiecutter_json.read_text(encoding="utf-8"))["torch_npu_version"]
    # As cookiecutter.json's __torch_version: the torch release is torch_npu's without its .postN.
    return sorted({minor_of(release.split(".post")[0]) for release in releases}, key=version_key)


def versions_of(spec: object, all_version: Sequence[str], where: str) -> list[str]:
    """The versions a version field names, as op-plugin's get_version() reads it.

    `all_version` is every version in all_version; a YAML list is the inclusive range from its
    first item to its second, `newest` meaning the end of all_version (get_version() reads no
    further item); a string is a list, split at ", " if it holds one, else at ",". What
    get_version() fails on (a range bound outside all_version, a list of one item, a number) is
    refused, naming `where`.
    """
    if spec is None:
        return []
    if isinstance(spec, list):
        if len(spec) < 2:
            raise FunctionsError(f"{where}: a version range is [first, last], got {spec}")
        first, last = spec[0], spec[1]
        for bound in [first] if last == "newest" else [first, last]:
            if bound not in all_version:
                raise FunctionsError(f"{where}: {bound!r} is not in all_version")
        start = all_version.index(first)
        stop = len(all_version) if last == "newest" else all_version.index(last) + 1
        return list(all_version[start:stop])
    if spec == "all_version":
        return list(all_version)
    if not isinstance(spec, str):
        raise FunctionsError(
            f"{where}: a version field is all_version, [first, last] or a string, got {spec!r}"
        )
    return spec.split(", ") if ", " in spec else spec.split(",")


def op_name(entry: object) -> str:
    """The entry's name as op-plugin spells it: `npu_silu`, or `npu_conv2d.out` for an overload."""
    func = entry.get("func") if isinstance(entry, dict) else None
    if not isinstance(func, str) or "(" not in func:
        raise FunctionsError(f"custom: an entry without a func schema: {entry!r}")
    return func.split("(", 1)[0].strip()


def aclop_only_ops(functions: Mapping[str, object], torch_version: str) -> list[str]:
    """The names of the `custom:` entries of a parsed op_plugin_functions.yaml that have an
    acl_op kernel and no op_api kernel for `torch_version`, sorted."""
    all_version = functions.get("all_version")
    if not isinstance(all_version, list):
        raise FunctionsError("all_version: missing, or no list")
    label = f"v{minor_of(torch_version)}"
    if label not in all_version:
        raise FunctionsError(f"all_version does not list {label}: this op-plugin predates torch {label[1:]}")
    entries = functions.get("custom")
    if not isinstance(entries, list):
        raise FunctionsError("custom: missing, or no list")
    built, aclop_only = set(), set()
    for entry in entries:
        name = op_name(entry)
        acl_op = versions_of(entry.get("acl_op"), all_version, f"{name}: acl_op")
        op_api = versions_of(entry.get("op_api"), all_version, f"{name}: op_api")
        if label not in acl_op and label not in op_api:
            continue  # no kernel for this version: an entry of the same name may have one
        if name in built:
            raise FunctionsError(f"{name} is listed twice for {label}")
        built.add(name)
        if label not in op_api:
            aclop_only.add(name)
    return sorted(aclop_only)


def aclop_only_table(functions: Mapping[str, object], torch_versions: Iterable[str]) -> dict[str, list[str]]:
    """aclop_only_ops() of each torch version, keyed by its minor version, in release order."""
    minors = sorted({minor_of(version) for version in torch_versions}, key=version_key)
    return {minor: aclop_only_ops(functions, minor) for minor in minors}


MODULE_TEXT = string.Template(
    r'''"""torch_npu's own operators that run on the aclop path alone, which aclgraph capture refuses.

A model that calls one of these (`torch_npu.npu_silu(x)`, `torch.ops.npu.npu_silu(x)`) cannot be
captured: "Cannot run aclop operators during NPU graph capture". An operator is listed for a torch
version when its entry under `custom:` in op-plugin's op_plugin_functions.yaml has an `acl_op:`
kernel for that version and no `op_api:` (aclnn) kernel. Operators with both kernels choose at
run time (the chip, JIT compile, internal formats) and are not listed; ATen's own are not either.

Generated by the template's scripts/aclop_ops.py from op-plugin's
$path at commit
$commit ($date), read from
$repository (mirror of $origin).
Do not edit it: the template regenerates it with these commands (for a newer op-plugin, with
its commit in COMMIT):

    COMMIT=$commit
    git clone $repository op-plugin
    git -C op-plugin show $${COMMIT}:$path > functions.yaml
    DATE=$$(git -C op-plugin log -1 --format=%cs $$COMMIT)
    python scripts/aclop_ops.py functions.yaml --commit $$COMMIT --date $$DATE
"""

from __future__ import annotations

import re

OP_PLUGIN_COMMIT = "$commit"
OP_PLUGIN_DATE = "$date"

ACLOP_ONLY: dict[str, frozenset[str]] = {
$rows}
"""The aclop-only operators per torch minor version ("2.13"), named as op-plugin names them:
`npu_silu` for an operator's default overload, `npu_conv2d.out` for another overload."""

_NAMESPACE = re.compile(r"^(torch\.ops\.)?npu(::|\.)")
_TORCH_MINOR = re.compile(r"^v?(\d+)\.(\d+)")


def aclop_only(op_name: str, torch_version: str) -> bool:
    """Whether torch_npu runs the npu operator `op_name` on the aclop path alone in `torch_version`.

    `op_name` is as op-plugin or a graph node's target names it, with or without the namespace
    (`npu::`, `npu.`, `torch.ops.npu.`): `npu_silu.default` and `npu_conv2d.out` are those
    overloads; a bare name (`npu_silu`, `npu_max`) is the operator whatever its overload, as a
    call of `torch.ops.npu.npu_max` is: aclop-only when any of its overloads is.
    `torch_version` is torch's (`2.13.0+cpu`, `2.13`): one the table has no row for gives False.
    """
    match = _TORCH_MINOR.match(torch_version)
    names = ACLOP_ONLY.get(f"{match[1]}.{match[2]}", frozenset()) if match else frozenset()
    name = _NAMESPACE.sub("", op_name)
    packet, _, overload = name.partition(".")
    if overload == "default":
        return packet in names
    if overload:
        return name in names
    return packet in names or any(other.startswith(f"{packet}.") for other in names)
'''
)


def render(table: Mapping[str, Sequence[str]], commit: str, date: str) -> str:
    """The toolkit module holding `table`, read from op-plugin's `commit` of `date`: plain Python,
    one name a line, as ruff formats it."""
    rows = []
    for version in sorted(table, key=version_key):
        if not table[version]:
            rows.append(f'    "{version}": frozenset(),\n')
            continue
        names = "".join(f'            "{name}",\n' for name in sorted(table[version]))
        rows.append(f'    "{version}": frozenset(\n        {{\n{names}        }}\n    ),\n')
    return MODULE_TEXT.substitute(
        commit=commit,
        date=date,
        path=FUNCTIONS_PATH,
        repository=REPOSITORY,
        origin=ORIGIN,
        rows="".join(rows),
    )


def commit_hash(value: str) -> str:
    if not COMMIT.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is no full commit hash (40 lowercase hex digits)")
    return value


def iso_date(value: str) -> str:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is no date (YYYY-MM-DD)") from None
    if len(value) != len("YYYY-MM-DD"):
        raise argparse.ArgumentTypeError(f"{value!r} is no date (YYYY-MM-DD)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("functions", type=Path, help=f"op-plugin's {FUNCTIONS_PATH}, read at --commit")
    parser.add_argument("--commit", required=True, type=commit_hash, help="op-plugin's commit, all 40 digits")
    parser.add_argument("--date", required=True, type=iso_date, help="that commit's date, YYYY-MM-DD")
    parser.add_argument(
        "--torch",
        action="append",
        metavar="VERSION",
        help="a torch version to tabulate (repeatable); default: those the torch_npu choices pin",
    )
    parser.add_argument(
        "--output", type=Path, default=MODULE, help="the module to write; default: the toolkit's"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the module is not what it would write",
    )
    args = parser.parse_args(argv)
    try:
        functions = yaml.safe_load(args.functions.read_text(encoding="utf-8"))
        if not isinstance(functions, dict):
            raise FunctionsError("no mapping of sections (all_version:, custom:, ...)")
        table = aclop_only_table(functions, args.torch or template_torch_versions())
    except (OSError, yaml.YAMLError, FunctionsError) as error:
        print(f"{args.functions}: {error}", file=sys.stderr)
        return 2
    text = render(table, args.commit, args.date)
    counts = ", ".join(f"{version}: {len(names)}" for version, names in table.items())
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else None
        if current != text:
            print(f"{args.output} is not the table of {args.functions} ({counts})", file=sys.stderr)
            return 1
        print(f"{args.output} is the table of {args.functions} ({counts})")
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}, aclop-only operators per torch version: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
