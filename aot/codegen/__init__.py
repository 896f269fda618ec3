"""Code generation back ends: cpu (LLVM -> shared object), nvptx (LLVM -> PTX for NVIDIA GPUs)."""
