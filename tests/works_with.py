"""The models a generated project is known to work with: small-config transformers decoders
behind the README's StaticCache wrapper in a decode project (its CONFIG, and that import, the
only change), and transformers encoders in a forward project, each run through the project's
own suite, whose tests run every tool on it.

The last run's verdicts are tests/works_with.json, and the generated README's "Models it works
with" table is written from them: both are written by a run, never by hand.

    python tests/works_with.py [--workers N] [NAME ...]   # what `nox -s works_with` runs

runs every case (or those named), then writes the results file and the README's table anew.
tests/test_works_with.py checks, in the full tier, that each model's run still gives its
recorded verdicts and, in the default tier, that the README's table is the results file's.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from conftest import TEMPLATE, bake, package_of
from tool_runs import ToolRun, run_tools

TESTS = Path(__file__).resolve().parent

RESULTS = TESTS / "works_with.json"
README = TEMPLATE / "{{cookiecutter.project_slug}}" / "README.md"
OWN_MODELS = TESTS / "own_models"
COMMAND = "nox -s works_with"

WRAPPER = (OWN_MODELS / "static_cache_llama.py").read_text()
WRAPPER_CONFIG = re.search(r"CONFIG = LlamaConfig\(.*?\n\)\n", WRAPPER, re.DOTALL)[0]
# The sizes every decoder below is built with: the README's Llama's, without its comment.
SMALL = "".join(
    line for line in WRAPPER_CONFIG.splitlines(keepends=True)[1:-1] if not line.lstrip().startswith("#")
)


# The README's examples of the other kinds of cache its wrapper holds (section "A transformers
# Llama with a StaticCache"): a recurrent layer's states, and latent attention's cache.
MAMBA2 = """\
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    # The SSM's heads, not attention's: num_heads * head_dim = hidden_size * expand (2).
    num_heads=4,
    head_dim=32,
    n_groups=1,
    state_size=16,
    chunk_size=16,
"""
DEEPSEEK_V3 = """\
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    # A key/value head per head, as in DeepSeek-V3's own config (128 of each; the default 128).
    num_key_value_heads=2,
    # What the cache holds per token: a latent of kv_lora_rank and a rotary key of qk_rope_head_dim.
    kv_lora_rank=32,
    qk_rope_head_dim=16,
    q_lora_rank=48,
    qk_nope_head_dim=16,
    v_head_dim=32,
    # A dense first layer, then 4 experts, 2 a token, in one group.
    first_k_dense_replace=1,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    n_group=1,
    topk_group=1,
"""


def behind_the_wrapper(config: str, fields: str = SMALL) -> str:
    """The README's StaticCache wrapper with CONFIG = config(fields), and its import, in place of
    the Llama's: what a user with another family's config changes, and all they change."""
    text = WRAPPER.replace(WRAPPER_CONFIG, f"CONFIG = {config}(\n{fields})\n")
    return text.replace("LlamaConfig", config)


@dataclass(frozen=True)
class Case:
    name: str
    workload: str
    """`decode` (the StaticCache wrapper's decode bake) or `forward`."""
    model: str
    """model.py's text."""
    config: str
    """What the table says of the config: its class, and what differs from the others'."""
    must_pass: bool = False
    """The README's worked example, or a model the template's tests required to pass before this
    table: every tool must pass on it, whatever the last run recorded."""


CASES = {
    case.name: case
    for case in (
        Case("Llama", "decode", WRAPPER, "`LlamaConfig`: the worked example's", must_pass=True),
        Case("Qwen2", "decode", behind_the_wrapper("Qwen2Config"), "`Qwen2Config`"),
        Case(
            "Qwen3",
            "decode",
            behind_the_wrapper("Qwen3Config"),
            "`Qwen3Config`: its own `head_dim`, 128, not `hidden_size / heads`",
        ),
        Case(
            "Qwen3-MoE",
            "decode",
            behind_the_wrapper(
                "Qwen3MoeConfig",
                SMALL + "    num_experts=4,\n    num_experts_per_tok=2,\n    moe_intermediate_size=64,\n",
            ),
            "`Qwen3MoeConfig`, 4 experts, 2 a token; `head_dim` 128",
        ),
        Case(
            "Mistral",
            "decode",
            behind_the_wrapper("MistralConfig"),
            "`MistralConfig`: a sliding window of 4096 in every layer, off in the cache",
            must_pass=True,
        ),
        Case(
            "Gemma 3",
            "decode",
            behind_the_wrapper(
                "Gemma3TextConfig",
                SMALL + '    layer_types=["sliding_attention", "full_attention"],\n',
            ),
            "`Gemma3TextConfig`: a sliding layer (window 4096, its own rotary base) and a full one; "
            "`head_dim` 256",
            must_pass=True,
        ),
        Case(
            "Phi-3",
            "decode",
            behind_the_wrapper("Phi3Config", SMALL + "    pad_token_id=0,\n    eos_token_id=2,\n"),
            "`Phi3Config`: `pad_token_id` and `eos_token_id` inside the vocabulary (32000 by default)",
        ),
        Case(
            "GPT-2",
            "decode",
            behind_the_wrapper(
                "GPT2Config",
                "    vocab_size=512,\n    n_embd=64,\n    n_inner=128,\n    n_layer=2,\n    n_head=2,\n"
                "    bos_token_id=0,\n    eos_token_id=0,\n",
            ),
            "`GPT2Config`: `n_embd`, `n_layer`, `n_head`, `n_inner`; no `num_key_value_heads`",
        ),
        Case(
            "Mamba2",
            "decode",
            behind_the_wrapper("Mamba2Config", MAMBA2),
            "`Mamba2Config`: no attention, a recurrent layer's conv and SSM states in the cache",
            must_pass=True,
        ),
        Case(
            "DeepSeek-V3",
            "decode",
            behind_the_wrapper("DeepseekV3Config", DEEPSEEK_V3),
            "`DeepseekV3Config`: latent attention, its cache a latent (`kv_lora_rank`) and a rotary "
            "key (`qk_rope_head_dim`); 4 experts, 2 a token",
            must_pass=True,
        ),
        Case(
            "BERT",
            "forward",
            (OWN_MODELS / "bert.py").read_text(),
            "`BertModel` on three LongTensors, a ModelOutput",
            must_pass=True,
        ),
        Case("ViT", "forward", (OWN_MODELS / "vit.py").read_text(), "`ViTModel` on images"),
        Case(
            "Whisper encoder",
            "forward",
            (OWN_MODELS / "whisper_encoder.py").read_text(),
            "`WhisperModel(...).get_encoder()`: special ids inside the vocabulary",
        ),
        Case(
            "T5 encoder",
            "forward",
            (OWN_MODELS / "t5_encoder.py").read_text(),
            "`T5EncoderModel` on ids and a mask",
        ),
    )
}

TOOLS = {
    "mre": "MRE",
    "check": "check",
    "bench": "bench",
    "doctor": "doctor",
    "export": "export",
    "generate": "generate",
    "suite": "tests",
}
"""Each verdict's key, and its column's title."""
PASSES = "ok"
NOT_RUN = "—"
GENERATE = ["generate", "--json", "--new-tokens", "4"]


def first_line(text: str) -> str:
    """A tool's own first line; for a traceback, the exception's line, which says what failed."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return lines[-1]
    return lines[0]


def last_line(text: str) -> str:
    """What a process said last: why it died, or pytest's summary of a run that failed so."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def failed(reason: str) -> str:
    return f"fails: {reason}"


def mre_verdict(code: int | None, printed: str, told: str) -> str:
    if code != 0:
        return failed(first_line(told))
    graphs = re.search(r"^first call .*", printed, re.MULTILINE)
    if graphs is None or ", 1 graph " not in graphs[0]:
        return failed(graphs[0] if graphs else first_line(printed))
    return PASSES


def check_verdict(code: int | None, printed: str, told: str) -> str:
    if code is None:
        return failed(first_line(told))
    report = json.loads(printed)
    if code == 0 and report["verdict"] == 0:
        return PASSES
    problems = [f for f in report["findings"] if f["severity"] == "problem"]
    if not problems:
        return failed(report["summary"])
    return failed(first_line(f"{problems[0]['what']}: {problems[0]['reason']}"))


def bench_verdict(code: int | None, printed: str, told: str) -> str:
    if code != 0:
        return failed(first_line(told or printed))
    if json.loads(printed)["outputs_match"] is not True:
        return failed("graph mode's outputs differ from eager's")
    return PASSES


def doctor_verdict(code: int | None, printed: str, told: str) -> str:
    """Off an NPU graph mode falls back (exit 1), and no line FAILs, the model's included: the
    promise of the suite's doctor test, to which a WARN on the model is no failure."""
    if code is None:
        return failed(first_line(told))
    lines = printed.splitlines()
    if bad := [line for line in lines if line.startswith("FAIL")]:
        return failed(" ".join(bad[0].split()))
    if not any(line.split()[1:2] == ["model"] for line in lines):
        return failed("no model line")
    if code != 1:
        return failed(f"exit {code} off an NPU")
    return PASSES


def export_verdict(code: int | None, printed: str, told: str) -> str:
    if code != 0:
        return failed(first_line(told or printed))
    return PASSES


def generate_verdict(code: int | None, printed: str, told: str) -> str:
    """Graph mode's greedy tokens are eager's, from one graph that never recompiles."""
    if code is None or not printed.strip():
        return failed(first_line(told))
    generated = json.loads(printed)
    if not generated["matches_eager"]:
        return failed("graph mode chose other tokens than eager")
    if generated["graphs"] != 1 or generated["recompiles"]:
        return failed(f"{generated['graphs']} graphs, recompiles: {'; '.join(generated['recompiles'])}")
    if {len(tokens) for tokens in generated["tokens"]} != {generated["prompt_length"] + 4}:
        return failed("not 4 new tokens a sequence")
    if code != 0:
        return failed(first_line(told))
    return PASSES


def suite_verdict(run: ToolRun) -> str:
    """The project's own tests: pass, or the first failing test's name and its first line."""
    if run.suite_code == 0:
        return PASSES
    summary = re.findall(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$", run.output, re.MULTILINE)
    if not summary:
        return failed(last_line(run.output))
    test, reason = summary[0]
    name = test.rpartition("::")[2]
    return failed(f"{name}: {reason}" if reason else name)


VERDICTS = {
    "mre": mre_verdict,
    "check": check_verdict,
    "bench": bench_verdict,
    "doctor": doctor_verdict,
    "export": export_verdict,
    "generate": generate_verdict,
}


def verdicts(run: ToolRun, workload: str) -> dict[str, str]:
    """Each tool's verdict on one run: `ok` where the suite's test of it passed, else the
    tool's own verdict, `ok` or `fails: ` and its own first line; a tool the run never reached
    (the program died first) fails with what the program last said."""

    def verdict(tool: str) -> str:
        if tool in run.passed:
            return PASSES
        if tool not in run.results:
            return failed(last_line(run.output))
        return VERDICTS[tool](*run.results[tool])

    found = {tool: verdict(tool) for tool in VERDICTS if tool != "generate" or workload == "decode"}
    found["suite"] = suite_verdict(run)
    return {tool: found.get(tool, NOT_RUN) for tool in TOOLS}


def run_case(case: Case, project: Path) -> tuple[dict[str, str], ToolRun]:
    """Each tool's verdict on `case`'s model, dropped into `project` (a bake of its workload
    that this run may change), and the run itself: the project's suite, then the tools whose
    tests in it did not pass, for their own words."""
    (project / "src" / package_of(project) / "model.py").write_text(case.model)
    extra = {"generate": GENERATE} if case.workload == "decode" else {}
    run = run_tools(project, extra=extra, suite_first=True, workload=case.workload)
    return verdicts(run, case.workload), run


def recorded() -> dict:
    """The last run: the versions it ran with, and the verdicts by model (`models`)."""
    return json.loads(RESULTS.read_text())


def versions() -> dict[str, str]:
    """The libraries a run's verdicts depend on, as installed where it runs."""
    return {name: metadata.version(name) for name in ("torch", "transformers")}


def cell(verdict: str) -> str:
    return verdict.replace("|", "\\|")


def render(results: dict) -> str:
    """The README's table of a run's `results`, a row per model, in CASES' order."""
    ran_with = " and ".join(f"{name} {version}" for name, version in results["versions"].items())
    lines = [
        f"With {ran_with}:",
        "",
        "| model | workload | config | " + " | ".join(TOOLS.values()) + " |",
        "|---|---|---|" + "---|" * len(TOOLS),
    ]
    for name, case in CASES.items():
        row = results["models"].get(name, {})
        cells = [cell(row.get(tool, "not run")) for tool in TOOLS]
        lines.append(f"| {name} | {case.workload} | {cell(case.config)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# Jinja leaves what is between them as it is, and them out of the generated README.
BEGIN = "{# works-with table: `nox -s works_with` writes it from tests/works_with.json -#}\n{% raw -%}\n"
END = "{% endraw -%}\n{# end of the works-with table: the line break after it leaves one blank line #}\n"


def readme_table(readme: str) -> str:
    """The table between the README's markers."""
    start = readme.index(BEGIN) + len(BEGIN)
    return readme[start : readme.index(END, start)]


def write(models: dict[str, dict[str, str]]) -> None:
    """The results file and the README's table, both anew from each model's verdicts."""
    results = {"versions": versions(), "models": {name: models[name] for name in CASES if name in models}}
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    readme = README.read_text()
    start = readme.index(BEGIN) + len(BEGIN)
    README.write_text(readme[:start] + render(results) + readme[readme.index(END, start) :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these models (the others keep their verdicts)")
    parser.add_argument("--workers", type=int, default=2, help="models run at once (default: 2)")
    arguments = parser.parse_args(argv)
    unknown = [name for name in arguments.names if name not in CASES]
    if unknown:
        parser.error(f"no such model: {', '.join(unknown)}; the models are {', '.join(CASES)}")
    chosen = [CASES[name] for name in arguments.names or CASES]
    results = recorded()["models"] if arguments.names and RESULTS.exists() else {}
    with tempfile.TemporaryDirectory(prefix="works-with-") as scratch:
        baked = {
            workload: bake(Path(scratch) / workload, workload=workload)
            for workload in {case.workload for case in chosen}
        }

        def one(case: Case) -> tuple[str, dict[str, str]]:
            started = time.perf_counter()
            project = Path(scratch) / "runs" / case.name.replace(" ", "-") / baked[case.workload].name
            shutil.copytree(baked[case.workload], project)
            found, _ = run_case(case, project)
            failing = {tool: verdict for tool, verdict in found.items() if verdict.startswith("fails")}
            print(
                f"{case.name}: {time.perf_counter() - started:.0f} s; {failing or 'every tool ok'}",
                flush=True,
            )
            return case.name, found

        with ThreadPoolExecutor(arguments.workers) as pool:
            results.update(pool.map(one, chosen))
    write(results)
    print(f"wrote {RESULTS.relative_to(TEMPLATE)} and the table in {README.relative_to(TEMPLATE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
