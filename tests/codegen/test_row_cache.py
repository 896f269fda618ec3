"""Row caching (codegen/row_cache.py): a softmax evaluates exp once per element.

The reduction's loop stores the reduced operand into the root's output row
and the inner loop reads it back; the results must equal the recomputing
kernel's on every x86 code path, and kernels where the root would read the
operand at another index (or where it is not f32) must not cache.
"""
from __future__ import annotations

import numpy as np
import pytest

from aot.codegen import row_cache
from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.planning.fusion import fuse
from bodies_util import compile_and_run
from passes_util import LAYER_NORM, ir
from targets_util import cpus_to_check

SOFTMAX = """
    graph @g(%x: f32[{rows},{cols}]) {{
      %m = reduce(%x) {{axes = [1], kind = "max"}} : f32[{rows}]
      %mb = broadcast(%m) {{dims = [0], shape = [{rows}, {cols}]}} : f32[{rows},{cols}]
      %s = sub(%x, %mb) : f32[{rows},{cols}]
      %e = exp(%s) : f32[{rows},{cols}]
      %t = reduce(%e) {{axes = [1], kind = "sum"}} : f32[{rows}]
      %tb = broadcast(%t) {{dims = [0], shape = [{rows}, {cols}]}} : f32[{rows},{cols}]
      %y = div(%e, %tb) : f32[{rows},{cols}]
      return %y as "y"
    }}"""


def _graph(text: str):
    return parse_graph(ir(text))


def test_softmax_caches_its_exponentials():
    (kernel,) = fuse(_graph(SOFTMAX.format(rows=3, cols=40)))
    cache = row_cache.find(kernel)
    assert cache is not None and cache.value.name == "e" and cache.reduce.out.name == "t"


def test_no_cache_where_the_root_reads_the_operand_through_data_movement():
    text = SOFTMAX.format(rows=4, cols=4).replace(
        '%y = div(%e, %tb) : f32[4,4]', '%r = reverse(%e) {dims = [1]} : f32[4,4]\n      %y = div(%r, %tb) : f32[4,4]')
    assert all(row_cache.find(kernel) is None for kernel in fuse(_graph(text)))


def test_no_cache_for_a_layer_norm_whose_root_never_reads_the_reduced_square():
    assert all(row_cache.find(kernel) is None for kernel in fuse(_graph(LAYER_NORM)))


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
@pytest.mark.parametrize("rows,cols", [(1, 1), (5, 7), (6, 1500), (3, 33)])
@pytest.mark.parametrize("pieces", [1, 3])
def test_cached_softmax_matches_the_reference(rows, cols, pieces, target):
    text = SOFTMAX.format(rows=rows, cols=cols)
    x = np.random.default_rng(rows * cols).standard_normal((rows, cols)).astype(np.float32) * 4
    if cols > 1:
        x.reshape(-1)[0] = -np.inf  # a masked position: exactly 0 after the cache round trip
    (expected,) = interpret(_graph(text), {"x": x})
    (got,), _ = compile_and_run(_graph(text), {"x": x}, pieces=pieces, target=target)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)
    if cols > 1:
        assert got.reshape(-1)[0] == 0.0


def test_unit_dims_do_not_emit_a_row_reduction_twice():
    # a leading unit dim: the emitters' own zero constants for it once missed the element
    # cache, so the sum (and its exp) ran a second time, uncached (a [1, 4, 1500, 1500]
    # softmax ran 1.7x slower than a [4, 1500, 1500] one)
    from aot.codegen.cpu import build_module
    from aot.codegen.cpu.target import CpuTarget
    from aot.pipeline import PipelineOptions, default_passes, run_pipeline

    text = SOFTMAX.format(rows=3, cols=40).replace("f32[3,40]", "f32[1,3,40]").replace("f32[3]", "f32[1,3]") \
        .replace("axes = [1]", "axes = [2]").replace("dims = [0], shape = [3, 40]", "dims = [0, 1], shape = [1, 3, 40]")
    plan = run_pipeline(_graph(text), PipelineOptions(passes=default_passes(16)))
    module, _ = build_module(plan, CpuTarget.host())
    assert str(module).count('call float @"aot.exp.f32"') == 1
