"""ai.onnx.ml tree ensembles: TreeEnsembleRegressor, TreeEnsembleClassifier (ml opset 1-3), TreeEnsemble (ml opset 5).

Each form is read first into one `Forest`: the nodes of all trees in one table
(feature, threshold, comparison, missing-value direction, the two children),
each leaf pointing to itself, and a [nodes, targets] table of leaf weights.
The lowering then walks all trees of the ensemble at once, as an [N, trees]
tensor of node positions, for as many levels as the deepest tree has:

    value  = X[n, feature[node]]             gather
    go     = value <= threshold[node]        compare (per comparison mode)
    node   = children[node, not go]          gather

A tree that reaches its leaf early stays there, so there is no loop and no
branch at run time: depth x (three gathers and a compare) over [N, trees].
The leaves' weight rows are gathered and reduced over the trees (SUM,
AVERAGE, MIN, MAX).

Scores, labels and probabilities follow onnxruntime (tree_ensemble_aggregator.h),
which fills in what the ONNX-ML text leaves open: base_values are added after
the aggregation; with several targets, one that no reached leaf scores reads
0 (its base value too); a binary classifier with one weight column widens it
to [1 - s, s] (weights all >= 0: probabilities, label at 0.5) or to [-s, s] /
[logistic(-s), logistic(s)] (margins, label at 0). Whether a class was scored
by some reached leaf is tracked per row only where the forest does not decide
it at compile time.

Three departures from onnxruntime, each where it contradicts the ONNX-ML text
and is reported as a bug there: post_transform applies to a single target too
(onnxruntime applies only PROBIT: microsoft/onnxruntime#26596); TreeEnsemble
numbers its post_transform values as the text does, 1 = SOFTMAX and 2 = LOGISTIC
(onnxruntime reads them swapped); a one-weight-column binary classifier with
LOGISTIC is read as margins even when its weights are all >= 0 (onnxruntime
then skips the sigmoid: microsoft/onnxruntime#27533).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, op_registry, take_index
from .ml_scores import as_rows, check_post_transform, first_argmax, gather_1d, gather_rows
from .ml_scores import post_transform, take_labels

OPS, op = op_registry()

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")
LEAF = -1
_COMPARE = {"BRANCH_LEQ": "le", "BRANCH_LT": "lt", "BRANCH_GTE": "ge", "BRANCH_GT": "gt", "BRANCH_EQ": "eq",
            "BRANCH_NEQ": "ne"}
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble's integer codes are these positions
# TreeEnsemble (opset 5) numbers its post_transform values in this order (the ONNX-ML text)
_V5_POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_INDEX_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Forest:
    """All trees of an ensemble in one node table (positions are node indices)."""

    feature: np.ndarray  # [M] int: the feature a branch reads
    threshold: np.ndarray  # [M] float64: the value it compares with
    mode: np.ndarray  # [M] int: index into MODES, LEAF for leaves
    missing_true: np.ndarray  # [M] bool: a NaN feature goes to the true child
    children: np.ndarray  # [M, 2] int: true child, false child; a leaf's are itself
    members: tuple[tuple[float, ...], ...]  # per node: the set a BRANCH_MEMBER node tests (empty otherwise)
    weights: np.ndarray  # [M, K] float64: what a leaf adds to each target
    scored: np.ndarray  # [M, K] bool: the leaf has an entry for the target
    roots: np.ndarray  # [T] int

    @property
    def targets(self) -> int:
        return self.weights.shape[1]


# -- reading the attributes ---------------------------------------------------------------
def _ints(a: NodeArgs, name: str) -> list[int]:
    return [int(v) for v in a.attr(name, [])]


def _floats(ctx: Ctx, a: NodeArgs, name: str) -> np.ndarray:
    """A float list attribute, or its `_as_tensor` twin (float64 thresholds and weights)."""
    tensor = a.attr(f"{name}_as_tensor")
    if isinstance(tensor, onnx.TensorProto) and tensor.ByteSize():
        if a.attr(name):
            raise ctx.error(f"both {name} and {name}_as_tensor are given")
        return numpy_helper.to_array(tensor).reshape(-1).astype(np.float64)
    return np.asarray(a.attr(name, []), dtype=np.float32).astype(np.float64)


def _tensor(ctx: Ctx, a: NodeArgs, name: str, required: bool = True) -> np.ndarray:
    value = a.attr(name)
    if not isinstance(value, onnx.TensorProto):
        if required:
            raise ctx.error(f"attribute '{name}' (a tensor) is missing")
        return np.zeros(0)
    return numpy_helper.to_array(value).reshape(-1)


def _same_lengths(ctx: Ctx, columns: dict[str, list | np.ndarray]) -> int:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name} {n}" for name, n in lengths.items())
        raise ctx.error(f"these attributes must have one entry per node (or leaf) each: {listed}")
    return next(iter(lengths.values()))


def _combine(aggregate: str) -> np.ufunc:
    """How two weights of one leaf for one target merge (onnxruntime applies the aggregate to each)."""
    return {"MIN": np.minimum, "MAX": np.maximum}.get(aggregate, np.add)


def _forest_v3(ctx: Ctx, a: NodeArgs, prefix: str, targets: int, aggregate: str) -> Forest:
    """TreeEnsembleRegressor (prefix 'target') / TreeEnsembleClassifier (prefix 'class') nodes and leaves."""
    tree_ids, node_ids = _ints(a, "nodes_treeids"), _ints(a, "nodes_nodeids")
    modes = list(a.attr("nodes_modes", []))
    features = _ints(a, "nodes_featureids")
    true_ids, false_ids = _ints(a, "nodes_truenodeids"), _ints(a, "nodes_falsenodeids")
    thresholds = _floats(ctx, a, "nodes_values")
    count = _same_lengths(ctx, {"nodes_treeids": tree_ids, "nodes_nodeids": node_ids, "nodes_modes": modes,
                                "nodes_featureids": features, "nodes_truenodeids": true_ids,
                                "nodes_falsenodeids": false_ids, "nodes_values": thresholds})
    if count == 0:
        raise ctx.error("the ensemble has no nodes")
    missing = _ints(a, "nodes_missing_value_tracks_true") or [0] * count
    _same_lengths(ctx, {"nodes_treeids": tree_ids, "nodes_missing_value_tracks_true": missing})
    position: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(tree_ids, node_ids)):
        if key in position:
            raise ctx.error(f"node {key[1]} of tree {key[0]} is defined twice")
        position[key] = i
    first_node: dict[int, int] = {}  # a tree's root is its first node, trees in order of first appearance
    for i, tree in enumerate(tree_ids):
        first_node.setdefault(tree, i)
    mode = np.full(count, LEAF, dtype=np.int64)
    children = np.tile(np.arange(count, dtype=np.int64)[:, None], (1, 2))
    for i, name in enumerate(modes):
        if name == "LEAF":
            continue
        if name not in MODES or name == "BRANCH_MEMBER":
            raise ctx.error(f"node {node_ids[i]} of tree {tree_ids[i]} has mode '{name}' "
                            f"(one of LEAF, {', '.join(MODES[:-1])})")
        mode[i] = MODES.index(name)
        for side, child in enumerate((true_ids[i], false_ids[i])):
            found = position.get((tree_ids[i], child))
            if found is None:
                raise ctx.error(f"node {node_ids[i]} of tree {tree_ids[i]} branches to node {child}, which the tree lacks")
            children[i, side] = found
    weights = np.zeros((count, targets))
    scored = np.zeros((count, targets), dtype=bool)
    ids, leaf_nodes, leaf_trees = _ints(a, f"{prefix}_ids"), _ints(a, f"{prefix}_nodeids"), _ints(a, f"{prefix}_treeids")
    values = _floats(ctx, a, f"{prefix}_weights")
    _same_lengths(ctx, {f"{prefix}_ids": ids, f"{prefix}_nodeids": leaf_nodes, f"{prefix}_treeids": leaf_trees,
                        f"{prefix}_weights": values})
    merge = _combine(aggregate)
    for target, node, tree, value in zip(ids, leaf_nodes, leaf_trees, values):
        if not 0 <= target < targets:
            raise ctx.error(f"{prefix}_ids holds {target}, outside [0, {targets})")
        found = position.get((tree, node))
        if found is None:
            raise ctx.error(f"a weight names node {node} of tree {tree}, which does not exist")
        if mode[found] != LEAF:
            continue  # onnxruntime ignores weights on branches (old onnxmltools wrote them)
        weights[found, target] = merge(weights[found, target], value) if scored[found, target] else value
        scored[found, target] = True
    return Forest(np.asarray(features, dtype=np.int64), thresholds, mode, np.asarray(missing) == 1, children,
                  tuple(() for _ in range(count)), weights, scored, np.asarray(list(first_node.values()), dtype=np.int64))


def _forest_v5(ctx: Ctx, a: NodeArgs, aggregate: str) -> tuple[Forest, DType]:
    """TreeEnsemble (opset 5): branches in nodes_*, leaves in leaf_*; the leaves follow the branches in the table."""
    features = _ints(a, "nodes_featureids")
    true_ids, false_ids = _ints(a, "nodes_truenodeids"), _ints(a, "nodes_falsenodeids")
    true_leaf, false_leaf = _ints(a, "nodes_trueleafs"), _ints(a, "nodes_falseleafs")
    modes = _tensor(ctx, a, "nodes_modes").astype(np.int64)
    splits_proto = a.attr("nodes_splits")
    splits = _tensor(ctx, a, "nodes_splits")
    count = _same_lengths(ctx, {"nodes_featureids": features, "nodes_truenodeids": true_ids,
                                "nodes_falsenodeids": false_ids, "nodes_trueleafs": true_leaf,
                                "nodes_falseleafs": false_leaf, "nodes_modes": modes, "nodes_splits": splits})
    missing = _ints(a, "nodes_missing_value_tracks_true") or [0] * count
    _same_lengths(ctx, {"nodes_featureids": features, "nodes_missing_value_tracks_true": missing})
    leaf_targets = _ints(a, "leaf_targetids")
    leaf_weights = _tensor(ctx, a, "leaf_weights")
    leaves = _same_lengths(ctx, {"leaf_targetids": leaf_targets, "leaf_weights": leaf_weights})
    targets = int(a.attr("n_targets", 0))
    if targets < 1:
        raise ctx.error(f"n_targets must be positive, got {targets}")
    roots = _ints(a, "tree_roots")
    if not roots or any(not 0 <= r < count for r in roots):
        raise ctx.error(f"tree_roots {roots} must name branches in [0, {count})")
    if ((modes < 0) | (modes >= len(MODES))).any():
        raise ctx.error(f"nodes_modes holds {sorted(set(modes.tolist()))}; modes are 0..{len(MODES) - 1}")
    size = count + leaves
    children = np.tile(np.arange(size, dtype=np.int64)[:, None], (1, 2))
    for i in range(count):
        for side, (child, is_leaf) in enumerate(((true_ids[i], true_leaf[i]), (false_ids[i], false_leaf[i]))):
            limit = leaves if is_leaf else count
            if not 0 <= child < limit:
                raise ctx.error(f"branch {i} points to {'leaf' if is_leaf else 'branch'} {child}, outside [0, {limit})")
            children[i, side] = count + child if is_leaf else child
    members = _member_sets(ctx, modes, _tensor(ctx, a, "membership_values", required=False))
    weights = np.zeros((size, targets))
    scored = np.zeros((size, targets), dtype=bool)
    for leaf, (target, value) in enumerate(zip(leaf_targets, leaf_weights.astype(np.float64))):
        if not 0 <= target < targets:
            raise ctx.error(f"leaf_targetids holds {target}, outside [0, n_targets = {targets})")
        weights[count + leaf, target] = value
        scored[count + leaf, target] = True
    forest = Forest(
        np.concatenate([np.asarray(features, dtype=np.int64), np.zeros(leaves, dtype=np.int64)]),
        np.concatenate([splits.astype(np.float64), np.zeros(leaves)]),
        np.concatenate([modes, np.full(leaves, LEAF, dtype=np.int64)]),
        np.concatenate([np.asarray(missing) == 1, np.zeros(leaves, dtype=bool)]),
        children, members + tuple(() for _ in range(leaves)), weights, scored, np.asarray(roots, dtype=np.int64))
    return forest, _v5_dtype(ctx, splits_proto, a.attr("leaf_weights"))


def _v5_dtype(ctx: Ctx, splits: onnx.TensorProto, weights: onnx.TensorProto) -> DType:
    kinds = {onnx.TensorProto.FLOAT: DType.F32, onnx.TensorProto.DOUBLE: DType.F64}
    for name, tensor in (("nodes_splits", splits), ("leaf_weights", weights)):
        if tensor.data_type not in kinds:
            raise ctx.unsupported(f"{name} of type {onnx.TensorProto.DataType.Name(tensor.data_type).lower()} "
                                  "(float and double only)")
    if splits.data_type != weights.data_type:
        raise ctx.error("nodes_splits and leaf_weights differ in type")
    return kinds[splits.data_type]


def _member_sets(ctx: Ctx, modes: np.ndarray, values: np.ndarray) -> tuple[tuple[float, ...], ...]:
    """Per branch, the members a BRANCH_MEMBER node tests: membership_values split at NaNs, in node order."""
    member = MODES.index("BRANCH_MEMBER")
    groups: list[list[float]] = [[]]
    for v in values.astype(np.float64):
        if np.isnan(v):
            groups.append([])
        else:
            groups[-1].append(float(v))
    if groups and not groups[-1]:
        groups.pop()
    needed = int((modes == member).sum())
    if len(groups) < needed:
        raise ctx.error(f"{needed} BRANCH_MEMBER nodes but membership_values holds {len(groups)} set(s)")
    sets = iter(groups)
    return tuple(tuple(next(sets)) if m == member else () for m in modes)


def _check_forest(ctx: Ctx, forest: Forest, features: int) -> int:
    """Reject cycles and features X lacks; the number of levels to walk (the longest root-to-leaf path)."""
    depth = np.full(len(forest.mode), -1)
    on_path = np.zeros(len(forest.mode), dtype=bool)
    for root in forest.roots:
        stack = [(int(root), False)]
        while stack:
            node, expanded = stack.pop()
            if depth[node] >= 0:
                continue
            if forest.mode[node] == LEAF:
                depth[node] = 0
                continue
            if expanded:
                on_path[node] = False
                depth[node] = 1 + max(depth[c] for c in forest.children[node])
                continue
            feature = int(forest.feature[node])
            if not 0 <= feature < features:
                raise ctx.error(f"a branch reads feature {feature}, but X has {features} features")
            on_path[node] = True
            stack.append((node, True))
            for child in forest.children[node]:
                if on_path[child]:
                    raise ctx.error(f"the trees have a cycle through node position {int(child)}")
                if depth[child] < 0:
                    stack.append((int(child), False))
    return int(depth[forest.roots].max())


def _scored_when(forest: Forest) -> list[bool | None]:
    """Per target: True when some tree scores it on every path, False when no leaf ever does, None when it
    depends on the row (then the lowering tracks it)."""
    always = np.zeros(forest.targets, dtype=bool)
    for root in forest.roots:
        leaves, seen, stack = [], {int(root)}, [int(root)]
        while stack:
            node = stack.pop()
            if forest.mode[node] == LEAF:
                leaves.append(node)
                continue
            for child in forest.children[node]:
                if int(child) not in seen:
                    seen.add(int(child))
                    stack.append(int(child))
        always |= forest.scored[leaves].all(axis=0)
    ever = forest.scored.any(axis=0)
    return [True if always[k] else (None if ever[k] else False) for k in range(forest.targets)]


# -- the walk ------------------------------------------------------------------------------
def _walk(ctx: Ctx, x: Value, forest: Forest, depth: int) -> Value:
    """x [N, F] -> [N, T] i32: the leaf each row reaches in each tree."""
    n, features = x.type.shape
    shape = (n, len(forest.roots))
    if n * features > _INDEX_LIMIT or len(forest.mode) * 2 > _INDEX_LIMIT:
        raise ctx.unsupported(f"X {x.type} or {len(forest.mode)} tree nodes overflow 32-bit indices")
    node = ctx.broadcast_in_dims(ctx.constant(forest.roots.astype(np.int32)), shape, (1,))
    if depth == 0:
        return node
    dtype = x.type.dtype
    flat_x = ctx.reshape(x, (n * features,))
    row_start = ctx.binary_scalar("mul", ctx.op("iota", [], shape=shape, dim=0, dtype=DType.I32), features)
    feature_table = ctx.constant(forest.feature.astype(np.int32))
    threshold_table = ctx.constant(forest.threshold.astype(dtype.to_numpy()))
    children_table = ctx.constant(forest.children.reshape(-1).astype(np.int32))  # (true, false) pairs
    branch = forest.mode != LEAF
    modes = sorted({int(m) for m in forest.mode[branch]})
    mode_table = ctx.constant(forest.mode.astype(np.int32)) if len(modes) > 1 else None
    member_table = _member_table(ctx, forest, dtype) if MODES.index("BRANCH_MEMBER") in modes else None
    tracks_missing = dtype.is_float and bool(forest.missing_true[branch].any())
    missing_table = ctx.constant(forest.missing_true.astype(np.int32)) if tracks_missing else None
    for _ in range(depth):
        value = gather_1d(ctx, flat_x, ctx.op("add", [row_start, gather_1d(ctx, feature_table, node)]))
        threshold = gather_1d(ctx, threshold_table, node)
        mode = gather_1d(ctx, mode_table, node) if mode_table is not None else None
        go_true = None
        for m in modes:
            test = _branch_test(ctx, MODES[m], value, threshold, node, member_table)
            if go_true is None:
                go_true = test
                continue
            is_mode = ctx.op("compare", [mode, ctx.full(m, mode.type)], direction="eq")
            go_true = ctx.op("select", [is_mode, test, go_true])
        if missing_table is not None:
            tracks = ctx.op("compare", [gather_1d(ctx, missing_table, node), ctx.full(0, node.type)], direction="ne")
            is_nan = ctx.op("compare", [value, value], direction="ne")
            go_true = ctx.op("or", [go_true, ctx.op("and", [tracks, is_nan])])
        went_false = ctx.convert(ctx.op("not", [go_true]), DType.I32)
        node = gather_1d(ctx, children_table, ctx.op("add", [ctx.binary_scalar("mul", node, 2), went_false]))
    return node


def _member_table(ctx: Ctx, forest: Forest, dtype: DType) -> Value:
    """[M, P]: each node's member set padded with NaN (which equals nothing)."""
    width = max(len(s) for s in forest.members)
    table = np.full((len(forest.members), width), np.nan)
    for i, members in enumerate(forest.members):
        table[i, :len(members)] = members
    return ctx.constant(table.astype(dtype.to_numpy()))


def _branch_test(ctx: Ctx, mode: str, value: Value, threshold: Value, node: Value, members: Value | None) -> Value:
    if mode != "BRANCH_MEMBER":
        return ctx.op("compare", [value, threshold], direction=_COMPARE[mode])
    rows = gather_rows(ctx, members, node)  # [N, T, P]
    wide = ctx.broadcast_in_dims(value, rows.type.shape, (0, 1))
    hits = ctx.convert(ctx.op("compare", [wide, rows], direction="eq"), DType.I32)
    return ctx.op("compare", [ctx.reduce(hits, "max", (2,)), ctx.full(0, node.type)], direction="gt")


# -- aggregation -----------------------------------------------------------------------------
def _aggregate(ctx: Ctx, leaves: Value, forest: Forest, aggregate: str, dtype: DType) -> Value:
    """[N, T] leaves -> [N, K] per target: the aggregate of the reached leaves' weights (those with an entry)."""
    table = forest.weights
    if aggregate in ("MIN", "MAX"):
        # a leaf without an entry for the target must not win: +inf for MIN, -inf for MAX
        table = np.where(forest.scored, table, np.inf if aggregate == "MIN" else -np.inf)
    rows = gather_rows(ctx, ctx.constant(table.astype(dtype.to_numpy())), leaves)  # [N, T, K]
    kind = {"SUM": "sum", "AVERAGE": "sum", "MIN": "min", "MAX": "max"}[aggregate]
    total = ctx.reduce(rows, kind, (1,))
    if aggregate == "AVERAGE":
        total = ctx.binary_scalar("div", total, len(forest.roots))
    return total


def _scored(ctx: Ctx, leaves: Value, forest: Forest) -> list[bool | Value]:
    """Per target: whether some reached leaf has an entry for it (a bool, or [N] i1 where rows differ)."""
    when = _scored_when(forest)
    if all(w is not None for w in when):
        return [bool(w) for w in when]
    rows = gather_rows(ctx, ctx.constant(forest.scored.astype(np.int32)), leaves)  # [N, T, K]
    hits = ctx.reduce(rows, "max", (1,))
    any_row = ctx.op("compare", [hits, ctx.full(0, hits.type)], direction="gt")
    return [w if w is not None else take_index(ctx, any_row, 1, k) for k, w in enumerate(when)]


def _pick(ctx: Ctx, condition: bool | Value, if_true: Value, if_false: Value) -> Value:
    """select with a condition that may be known at compile time; a [N] condition spans the columns of [N, C]."""
    if isinstance(condition, bool):
        return if_true if condition else if_false
    wide = ctx.broadcast_in_dims(condition, if_true.type.shape, (0,))
    return ctx.op("select", [wide, if_true, if_false])


def _column(ctx: Ctx, scores: Value, k: int) -> Value:
    return take_index(ctx, scores, 1, k)


def _stack(ctx: Ctx, columns: list[Value]) -> Value:
    n = columns[0].type.shape[0]
    return ctx.op("concat", [ctx.reshape(c, (n, 1)) for c in columns], axis=1)


def _add_base(ctx: Ctx, scores: Value, base: list[float]) -> Value:
    """scores [N, K] + base values of the first len(base) targets."""
    if not any(base):
        return scores
    padded = np.zeros(scores.type.shape[1])
    padded[:len(base)] = base
    return ctx.op("add", [scores, ctx.broadcast_to(ctx.constant(padded.astype(scores.type.dtype.to_numpy())),
                                                   scores.type.shape)])


# -- regressors ------------------------------------------------------------------------------
def _regress(ctx: Ctx, x: Value, forest: Forest, aggregate: str, base: list[float], kind: str, dtype: DType) -> Value:
    """The ensemble's scores [N, K]: aggregate, base values, then the post transform.

    As onnxruntime: with several targets, a target that no reached leaf scores reads 0,
    base value included; one target adds its base value to whatever the trees gave.
    """
    x = as_rows(ctx, x)
    depth = _check_forest(ctx, forest, x.type.shape[1])
    leaves = _walk(ctx, x, forest, depth)
    scores = _aggregate(ctx, leaves, forest, aggregate, dtype)
    scored = _scored(ctx, leaves, forest)
    if forest.targets == 1:
        if aggregate in ("MIN", "MAX"):
            scores = _zero_unscored(ctx, scores, scored)
        scores = _add_base(ctx, scores, base if len(base) == 1 else [])
    else:
        scores = _zero_unscored(ctx, _add_base(ctx, scores, base if len(base) == forest.targets else []), scored)
    return post_transform(ctx, scores, kind)


def _zero_unscored(ctx: Ctx, scores: Value, scored: list[bool | Value]) -> Value:
    """scores [N, K] with 0 where column k was not scored (MIN/MAX leave +-inf there)."""
    if all(s is True for s in scored):
        return scores
    zero = ctx.full(0.0, scores.type)
    return _stack(ctx, [_pick(ctx, s, _column(ctx, scores, k), _column(ctx, zero, k)) for k, s in enumerate(scored)])


def _compute_dtype(ctx: Ctx, x: Value) -> DType:
    """onnxruntime compares and accumulates in double for double X, else in float."""
    if x.type.dtype is DType.F64:
        return DType.F64
    if x.type.dtype is DType.F32 or x.type.dtype.is_int:
        return DType.F32
    raise ctx.unsupported(f"X of type {x.type.dtype.value} (float, double and integers only)")


def _aggregate_name(ctx: Ctx, name: str) -> str:
    if name not in AGGREGATES:
        raise ctx.error(f"aggregate_function '{name}' is not one of {', '.join(AGGREGATES)}")
    return name


def _base_values(ctx: Ctx, a: NodeArgs) -> list[float]:
    return [float(v) for v in _floats(ctx, a, "base_values")]


@op("TreeEnsembleRegressor")
def _tree_ensemble_regressor(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    dtype = _compute_dtype(ctx, x)
    aggregate = _aggregate_name(ctx, a.attr("aggregate_function", "SUM"))
    targets = int(a.attr("n_targets", 0))
    if targets < 1:
        raise ctx.error(f"n_targets must be positive, got {targets}")
    forest = _forest_v3(ctx, a, "target", targets, aggregate)
    kind = check_post_transform(ctx, a.attr("post_transform", "NONE"))
    y = _regress(ctx, ctx.convert(x, dtype), forest, aggregate, _base_values(ctx, a), kind, dtype)
    return [ctx.convert(y, DType.F32)]


@op("TreeEnsemble")
def _tree_ensemble(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    code = int(a.attr("aggregate_function", 1))
    if not 0 <= code < len(AGGREGATES):
        raise ctx.error(f"aggregate_function {code} is not one of 0..{len(AGGREGATES) - 1}")
    aggregate = AGGREGATES[code]
    forest, dtype = _forest_v5(ctx, a, aggregate)
    if x.type.dtype is not dtype:
        raise ctx.error(f"X is {x.type.dtype.value} but the trees' splits and weights are {dtype.value}")
    code = int(a.attr("post_transform", 0))
    if not 0 <= code < len(_V5_POST_TRANSFORMS):
        raise ctx.error(f"post_transform {code} is not one of 0..{len(_V5_POST_TRANSFORMS) - 1}")
    return [_regress(ctx, x, forest, aggregate, [], _V5_POST_TRANSFORMS[code], dtype)]


# -- the classifier ----------------------------------------------------------------------------
@op("TreeEnsembleClassifier")
def _tree_ensemble_classifier(ctx: Ctx, a: NodeArgs) -> list[Value]:
    if a.attr("classlabels_strings"):
        raise ctx.unsupported("string class labels (classlabels_strings): aot compiles no string tensors; "
                              "train on integer labels (e.g. LabelEncoder().fit_transform(y)) and map them back after")
    labels = _ints(a, "classlabels_int64s")
    if len(labels) < 2:
        raise ctx.unsupported(f"{len(labels)} class label(s): a classifier needs at least 2 classlabels_int64s")
    x = as_rows(ctx, a.inputs[0])
    dtype = _compute_dtype(ctx, x)
    x = ctx.convert(x, dtype)
    forest = _forest_v3(ctx, a, "class", len(labels), "SUM")
    kind = check_post_transform(ctx, a.attr("post_transform", "NONE"))
    base = _base_values(ctx, a)
    depth = _check_forest(ctx, forest, x.type.shape[1])
    leaves = _walk(ctx, x, forest, depth)
    sums = _aggregate(ctx, leaves, forest, "SUM", dtype)
    scored = _scored(ctx, leaves, forest)
    if len(labels) > 2:
        label, scores = _many_classes(ctx, sums, scored, base, labels, kind)
    else:
        weight_ids = set(_ints(a, "class_ids"))
        all_positive = bool((_floats(ctx, a, "class_weights") >= 0).all())
        label, scores = _two_classes(ctx, sums, scored, base, labels, kind, len(weight_ids) == 1, all_positive)
    return [label, ctx.convert(scores, DType.F32)]


def _many_classes(ctx: Ctx, sums: Value, scored: list[bool | Value], base: list[float], labels: list[int],
                  kind: str) -> tuple[Value, Value]:
    """Label: the first best score among the classes scored (or given a base value); scores: post transform of all."""
    scores = _add_base(ctx, sums, base)
    scored = [True if k < len(base) else s for k, s in enumerate(scored)]
    ranked = scores
    if not all(s is True for s in scored):
        lowest = ctx.full(float("-inf"), scores.type)
        ranked = _stack(ctx, [_pick(ctx, s, _column(ctx, scores, k), _column(ctx, lowest, k))
                              for k, s in enumerate(scored)])
    return take_labels(ctx, labels, first_argmax(ctx, ranked)), post_transform(ctx, scores, kind)


def _two_classes(ctx: Ctx, sums: Value, scored: list[bool | Value], base: list[float], labels: list[int], kind: str,
                 one_weight_column: bool, all_positive: bool) -> tuple[Value, Value]:
    """onnxruntime's binary rules (TreeAggregatorClassifier::FinalizeScores, write_scores).

    With two base values and a class-1 score, p1 = base1 + s0 and p0 = -p1; else each
    class adds its base value. Without a class-1 score there is one score column,
    s0 (plus one base value), widened to two. The label reads the positive score:
    class 1 if scored, else class 0. A one-weight-column ensemble (every weight for one
    class) decides at 0.5 when its weights are all >= 0, else at 0, and names its
    labels; any other two-class ensemble answers 1 or 0 (onnxruntime's literal labels).
    """
    if len(base) > 2:
        raise ctx.error(f"a two-class ensemble takes at most 2 base_values, got {len(base)}")
    s0, s1 = _column(ctx, sums, 0), _column(ctx, sums, 1)
    h0, h1 = scored
    zero = ctx.full(0.0, s0.type)
    if len(base) == 2:
        p1_after = ctx.binary_scalar("add", s0, base[1])
        p0 = _pick(ctx, h1, ctx.op("neg", [p1_after]), ctx.binary_scalar("add", s0, base[0]))
        p1 = _pick(ctx, h1, p1_after, ctx.binary_scalar("add", s1, base[1]))
        two_columns: bool | Value = True
    else:
        p0 = ctx.binary_scalar("add", s0, base[0]) if base else s0
        p1 = s1
        two_columns = h1
    positive_score = _pick(ctx, h1, p1, _pick(ctx, h0, p0, zero))
    # weights all >= 0 and no logistic: the column holds class-1 probabilities; otherwise margins
    probabilities = one_weight_column and all_positive and kind != "LOGISTIC"
    cut = 0.5 if probabilities else 0.0
    positive = ctx.op("compare", [positive_score, ctx.full(cut, positive_score.type)], direction="gt")
    named = (labels[0], labels[1]) if one_weight_column else (0, 1)
    label_type = positive.type.with_dtype(DType.I64)
    label = ctx.op("select", [positive, ctx.full(named[1], label_type), ctx.full(named[0], label_type)])
    # an unscored class shows 0 in the scores, its base value dropped (onnxruntime's ScoreValue)
    shown0, shown1 = _pick(ctx, h0, p0, zero), _pick(ctx, h1, p1, zero)
    if two_columns is True:
        return label, post_transform(ctx, _stack(ctx, [shown0, shown1]), kind)
    if not one_weight_column and base:
        raise ctx.unsupported("a two-class ensemble whose class-1 column can stay unscored, with base_values: "
                              "onnxruntime leaves half of its scores unset")
    widened = _widen(ctx, shown0, kind, probabilities)
    if two_columns is False:
        return label, widened
    return label, _pick(ctx, two_columns, post_transform(ctx, _stack(ctx, [shown0, shown1]), kind), widened)


def _widen(ctx: Ctx, score: Value, kind: str, probabilities: bool) -> Value:
    """One score column s -> [N, 2]: [1 - s, s] for probabilities, [logistic(-s), logistic(s)] or [-s, s] for margins."""
    if kind == "PROBIT":
        raise ctx.unsupported("PROBIT on a one-column binary ensemble (onnxruntime leaves half of the scores unset)")
    if probabilities:
        return _stack(ctx, [ctx.op("sub", [ctx.full(1.0, score.type), score]), score])
    if kind == "LOGISTIC":
        return _stack(ctx, [ctx.op("logistic", [ctx.op("neg", [score])]), ctx.op("logistic", [score])])
    return _stack(ctx, [ctx.op("neg", [score]), score])
