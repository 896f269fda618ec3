"""Code generation: the back ends cpu (LLVM -> shared object) and nvptx (LLVM -> PTX for NVIDIA
GPUs), and the target-neutral emitters both use (elemental.py, math.py, loops.py, work_item.py, ...)."""
