"""Differential graph testing (as NNSmith, ASPLOS 2023): random ONNX graphs that are
valid by construction, compiled by aot and compared with onnxruntime; a failure is
shrunk to a minimal graph and saved as a regression model.

    generate.case_for(seed, targets) -> FuzzCase (model, feeds, cpu, threads, or a GPU path)
    differential.check_case(case)    -> Outcome (ok, mismatch, compile_error, ...)
    shrink.shrink(case, still_fails) -> the smallest case that still fails

A target is a CPU code path (the compiled artifact) or the GPU path ("gpu", "gpu-tf32":
the plan's GPU kernels emulated on the host, their PTX through ptxas).
`benchmarks/fuzz_graphs.py --minutes N [--gpu]` runs it long; tests/fuzz/test_fuzz_graphs.py
runs a seeded short batch; tests/data/fuzz/ holds the shrunk regressions.
"""
