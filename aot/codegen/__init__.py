"""Code generation back ends: cpu (LLVM -> shared object)."""
