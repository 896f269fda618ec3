"""aot inside serving frameworks:

- `aot.integrations.rows`: requests of any number of rows on an artifact compiled for a
  fixed batch (stack, cut into runs, pad the last, slice back); numpy only;
- `aot.integrations.ray_serve`: `deployment(...)`, an artifact as a Ray Serve application,
  one `aot.Session` per replica (needs the `aot-compiler[ray]` extra).

Nothing here is imported by `import aot`: a framework is loaded only by its own module.
"""
