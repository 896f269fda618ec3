"""Planning: turn the rewritten graph into an ExecutionPlan (aot/plan.py): fusion into
kernels, a kernel order, buffers and the arena placement. Nothing here changes the graph."""
