"""export's text rewrites, one at a time: each changes what it names and keeps every other
character of the code it is given, so that the exported file reads as the project's code does."""

import ast

import pytest

from forward_project.toolkit import export


def remove(text: str, statement: str) -> str:
    """`text` without its first statement whose code is `statement`."""
    tree = ast.parse(text)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    node = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and ast.get_source_segment(text, node) == statement
    )
    return export.remove_statement(text, node, parents[node])


def test_a_statement_among_others_goes_with_the_comment_above_it():
    """Removed from a block of two, a statement leaves the other alone, and takes its comments."""
    text = "def f():\n    a()\n    # why b\n    b()\n"
    assert remove(text, "b()") == "def f():\n    a()\n"


def test_the_only_statement_of_a_block_leaves_pass_in_its_place():
    """A block cannot be empty: its one statement becomes `pass`, at its indentation."""
    assert remove("def f():\n    a()\n", "a()") == "def f():\n    pass\n"


@pytest.mark.parametrize(
    ("text", "statement", "left"),
    [
        ("if x:\n    a()\n    b()\nelse:\n    c()\n", "c()", "if x:\n    a()\n    b()\nelse:\n    pass\n"),
        ("try:\n    a()\nfinally:\n    c()\n", "c()", "try:\n    a()\nfinally:\n    pass\n"),
        ("try:\n    a()\nfinally:\n    c()\n    d()\n", "c()", "try:\n    a()\nfinally:\n    d()\n"),
    ],
    ids=["else", "finally alone", "finally of two"],
)
def test_a_statement_of_an_else_or_finally_block_is_counted_in_its_own_block(text, statement, left):
    """Whether `pass` is due depends on the block the statement is in, not the body above it."""
    assert remove(text, statement) == left


def test_the_whole_text_removed_is_empty():
    """A statement that was all of the text leaves nothing, not `pass`."""
    assert remove("a()\n", "a()") == ""


@pytest.mark.parametrize(
    ("text", "statement", "left"),
    [
        ("a()\n\nb()\nc()", "a()", "b()\nc()"),
        ("def f():\n    a()\n\n    b()\n", "a()", "def f():\n    b()\n"),
        ("x = 1\na()\n\nb()\n", "a()", "x = 1\n\nb()\n"),
        ("def f():  \n    a()\n\n    b()\n", "a()", "def f():  \n    b()\n"),
        ("a()\nb()", "b()", "a()"),
    ],
    ids=[
        "first line",
        "first of a block",
        "between statements",
        "after a colon and spaces",
        "last, no newline",
    ],
)
def test_no_blank_line_is_left_at_the_start_of_a_block_nor_two_in_a_row(text, statement, left):
    """The blank line after a removed statement goes where it would start the text or a block;
    between two statements it stays, as the one that separated them."""
    assert remove(text, statement) == left


def test_dedent_removes_indentation_only():
    """A branch's lines lose the indentation of its block, and a line less indented (in a string
    over several lines) loses only what it has."""
    assert export.dedent(["        a()", '  "b"', "", "    c()"], 4) == ["    a()", '"b"', "", "c()"]


def test_f_prefixes_are_dropped_from_every_part_and_line_of_a_string():
    """Once no field is left, each part loses its f (and only its f, whatever its case and the
    prefixes beside it); the other parts, lines and characters are as they were."""
    segment = 'f"for {{x}}" rf"\\d"\n    F"fair" "f" R"b"'
    assert export.drop_f_prefixes(segment) == '"for {{x}}" r"\\d"\n    "fair" "f" R"b"'


CACHE_COMPILE_CALL = """\
def build():
    model = make()
    if ready:
        compiled = cache_compile(model.forward, dynamic=False, cache_dir=CACHE, **ranks)
    return compiled
"""


@pytest.mark.parametrize("tensor_parallel", [False, True])
def test_cache_compile_is_written_as_npugraph_ex_s_own_with_its_options(monkeypatch, tensor_parallel):
    """The call keeps its arguments in order, one a line at its indentation, gains the npugraph_ex
    options, and keeps a rank's keywords (`**ranks`) only with tensor parallelism."""
    monkeypatch.setattr(export.project, "TENSOR_PARALLEL", tensor_parallel)
    ranks = "            **ranks,\n" if tensor_parallel else ""
    assert export.literal_cache_compile(CACHE_COMPILE_CALL) == (
        "def build():\n"
        "    model = make()\n"
        "    if ready:\n"
        "        compiled = torch.npu.npugraph_ex.inference.cache_compile(\n"
        "            model.forward,\n"
        "            dynamic=False,\n"
        "            cache_dir=CACHE,\n"
        "            options=NPUGRAPH_EX_OPTIONS,\n"
        f"{ranks}"
        "        )\n"
        "    return compiled\n"
    )


def test_an_annotation_naming_a_type_the_file_lacks_is_dropped_with_its_arrow_only():
    """Of `-> Ranks:` nothing is left, and the other functions' arrows, before and after it, and
    an arrow in the code after it stay."""
    text = (
        "def before() -> int:\n"
        "    return 1\n"
        "\n"
        'def ranks(size: int = 2) -> Ranks: return "a->b"\n'
        "\n"
        "def after() -> str:\n"
        '    return "c"\n'
    )
    assert export.drop_annotations(text, {"Ranks"}) == text.replace(" -> Ranks:", ":")


def test_an_argument_annotation_naming_a_type_the_file_lacks_keeps_its_default():
    """`ranks: Ranks | None = None` is `ranks=None`; an annotation of another type stays."""
    text = "def shard(model: Module, ranks: Ranks | None = None, plan: Plan = PLAN):\n    pass\n"
    assert export.drop_annotations(text, {"Ranks"}) == (
        "def shard(model: Module, ranks=None, plan: Plan = PLAN):\n    pass\n"
    )
