{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""Your tests' shared fixtures come from the toolkit's pytest plugin (toolkit/testing.py): mre_run,
the MRE run once; eager_output, its step without graph mode; exported, export's file run{{ "; two_ranks,
one torchrun of two ranks" if tp else "" }}.
Tests marked `npu` skip where no NPU can run npugraph_ex. Add fixtures of your own here."""

pytest_plugins = ["{{ cookiecutter.package_name }}.toolkit.testing"]
