"""Code generation backends: cpu (LLVM -> shared object), gpu (NVPTX)."""
