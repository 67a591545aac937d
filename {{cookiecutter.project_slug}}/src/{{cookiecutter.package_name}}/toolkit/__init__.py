"""The template's machinery: backend choice, compile cache, report, check, doctor, bench, export.

Maintained by npugraph-template, not by you: `cruft update` brings its new versions, so edit your
own files instead (model.py, mre.py and your custom operator at the package top). Every tool here
works from the contract in model.py, `build_model()` and `example_inputs()`, and never from the
sample model's name or input.
"""
