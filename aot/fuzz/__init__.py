"""Differential graph testing (as NNSmith, ASPLOS 2023): random ONNX graphs that are
valid by construction, compiled by aot and compared with onnxruntime; a failure is
shrunk to a minimal graph and saved as a regression model.

    generate.random_model(seed)      -> FuzzCase (model, feeds, cpu, threads)
    differential.check_case(case)    -> Outcome (ok, mismatch, compile_error, ...)
    shrink.shrink(case, still_fails) -> the smallest case that still fails

`benchmarks/fuzz_graphs.py --minutes N` runs it long; tests/fuzz/test_fuzz_graphs.py
runs a seeded short batch; tests/data/fuzz/ holds the shrunk regressions.
"""
