"""Graph rewrites, one pass per module: each a `Pass` (base.py) that rewrites the IR in
place and says whether it changed it; the pipeline runs them to a fixed point."""
