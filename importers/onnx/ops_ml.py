"""ai.onnx.ml ops of classic ML pipelines (skl2onnx output), except the tree ensembles (ops_trees.py).

Scaler, Normalizer, Binarizer, Imputer, ArrayFeatureExtractor, OneHotEncoder,
LabelEncoder, LinearRegressor, LinearClassifier. Each follows onnxruntime
where the ONNX-ML text leaves room (X may be 1-D, read as one row; a binary
LinearClassifier with one score column widens it to two; the first maximal
score wins), and the text where onnxruntime has a reported bug (each named
where it matters). String tensors (string labels, categories or keys) are
not compiled: each such attribute is refused by name. ZipMap produces a
sequence of maps, which aot cannot represent: it is refused with the
exporter option that removes it.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, op_registry
from .loader import to_dtype
from .ml_scores import as_rows, check_post_transform, first_argmax, gather_1d, post_transform, take_labels

OPS, op = op_registry()


def _refuse_strings(ctx: Ctx, a: NodeArgs, *names: str) -> None:
    for name in names:
        if a.attr(name):
            raise ctx.unsupported(f"string attribute '{name}': aot compiles no string tensors; "
                                  "encode the strings as integers before export (e.g. a LabelEncoder in the pipeline)")


def _float_input(ctx: Ctx, x: Value) -> Value:
    """X as the float type the op computes in: float32, or float64 for double X."""
    if x.type.dtype in (DType.F32, DType.F64):
        return x
    if x.type.dtype.is_int or x.type.dtype.is_float:
        return ctx.convert(x, DType.F32)
    raise ctx.unsupported(f"X of type {x.type.dtype.value} (numbers only)")


def _per_feature(ctx: Ctx, values: list[float], what: str, features: int) -> np.ndarray:
    """An attribute of one value per feature, or one value for all."""
    if len(values) == features:
        return np.asarray(values)
    if len(values) == 1:
        return np.full(features, values[0])
    raise ctx.error(f"{what} has {len(values)} values; expected 1 or one per feature ({features})")


# -- feature transforms ---------------------------------------------------------------
@op("Scaler")
def _scaler(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y = (X - offset) * scale, per feature (last dim), as float."""
    x = _float_input(ctx, a.inputs[0])
    if x.type.rank not in (1, 2):
        raise ctx.unsupported(f"X must be 1-D or 2-D, got {x.type}")
    features = x.type.shape[-1]
    scale, offset = list(a.attr("scale", [])), list(a.attr("offset", []))
    if not scale or len(scale) != len(offset):
        raise ctx.error(f"scale ({len(scale)} values) and offset ({len(offset)}) must be given with the same length")
    dtype = x.type.dtype
    offset_v = ctx.broadcast_to(ctx.constant(_per_feature(ctx, offset, "offset", features), dtype), x.type.shape)
    scale_v = ctx.broadcast_to(ctx.constant(_per_feature(ctx, scale, "scale", features), dtype), x.type.shape)
    y = ctx.op("mul", [ctx.op("sub", [x, offset_v]), scale_v])
    return [ctx.convert(y, DType.F32)]


@op("Normalizer")
def _normalizer(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Each row divided by its max (MAX), sum of |x| (L1) or Euclidean norm (L2); a row whose norm is 0 stays as it is."""
    x0 = a.inputs[0]
    x = as_rows(ctx, ctx.convert(_float_input(ctx, x0), DType.F32))
    norm = a.attr("norm", "MAX")
    shape = x.type.shape
    if norm == "MAX":
        scale = ctx.reduce(x, "max", (1,))
    elif norm == "L1":
        scale = ctx.reduce(ctx.op("abs", [x]), "sum", (1,))
    elif norm == "L2":
        scale = ctx.op("sqrt", [ctx.reduce(ctx.op("mul", [x, x]), "sum", (1,))])
    else:
        raise ctx.error(f"norm '{norm}' is not one of MAX, L1, L2")
    scale = ctx.unreduce(scale, shape, (1,))
    zero = ctx.op("compare", [scale, ctx.full(0.0, scale.type)], direction="eq")
    y = ctx.op("select", [zero, x, ctx.op("div", [x, scale])])
    return [ctx.reshape(y, x0.type.shape)]


@op("Binarizer")
def _binarizer(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y = 1 where X > threshold, else 0, in X's type (NaN gives 0; onnxruntime fails the run)."""
    x = a.inputs[0]
    threshold = float(a.attr("threshold", 0.0))
    # integers compare in float64, where any float32 threshold is exact
    wide = x if x.type.dtype.is_float else ctx.convert(x, DType.F64)
    above = ctx.op("compare", [wide, ctx.full(threshold, wide.type)], direction="gt")
    return [ctx.op("select", [above, ctx.full(1, x.type), ctx.full(0, x.type)])]


@op("Imputer")
def _imputer(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Elements equal to the replaced value (NaN matches NaN) become the imputed value of their feature."""
    x = a.inputs[0]
    if x.type.rank not in (1, 2):
        raise ctx.unsupported(f"X must be 1-D or 2-D, got {x.type}")
    floats, ints = list(a.attr("imputed_value_floats", [])), list(a.attr("imputed_value_int64s", []))
    if bool(floats) == bool(ints):
        raise ctx.error("exactly one of imputed_value_floats and imputed_value_int64s must be given")
    if x.type.dtype.is_float:
        if not floats:
            raise ctx.error(f"X is {x.type.dtype.value}: the imputed values must be imputed_value_floats")
        imputed, replaced = floats, float(a.attr("replaced_value_float", 0.0))
    elif x.type.dtype.is_int:
        if not ints:
            raise ctx.error(f"X is {x.type.dtype.value}: the imputed values must be imputed_value_int64s")
        imputed, replaced = ints, int(a.attr("replaced_value_int64", 0))
    else:
        raise ctx.unsupported(f"X of type {x.type.dtype.value}")
    values = ctx.broadcast_to(ctx.constant(_per_feature(ctx, imputed, "the imputed values", x.type.shape[-1]), x.type.dtype),
                              x.type.shape)
    if isinstance(replaced, float) and math.isnan(replaced):
        missing = ctx.op("compare", [x, x], direction="ne")
    else:
        missing = ctx.op("compare", [x, ctx.full(replaced, x.type)], direction="eq")
    return [ctx.op("select", [missing, values, x])]


@op("ArrayFeatureExtractor")
def _array_feature_extractor(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Z = X[..., indices] over the last dim; a 1-D X gives [1, len(indices)] (onnxruntime)."""
    x, indices = a.inputs
    if x.type.rank == 0:
        raise ctx.error("X must have at least one dim")
    features = x.type.shape[-1]
    count = indices.type.size
    known = ctx.const(indices)
    if known is not None and ((known < 0) | (known >= features)).any():
        raise ctx.error(f"indices {known.reshape(-1).tolist()} fall outside X's last dim ({features})")
    if count == 0:
        raise ctx.error("indices are empty")
    rows = math.prod(x.type.shape[:-1])
    matrix = ctx.reshape(x, (rows, features))
    flat = ctx.reshape(ctx.convert(indices, DType.I64), (count,))
    # out[m, r] = matrix[r, flat[m]]: the index picks the start of a one-column window over every row
    picked = ctx.op("gather", [matrix, flat], offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,),
                    index_vector_dim=1, slice_sizes=(rows, 1))
    out = ctx.transpose(picked, (1, 0))
    shape = (1, count) if x.type.rank == 1 else x.type.shape[:-1] + (count,)
    return [ctx.reshape(out, shape)]


@op("OneHotEncoder")
def _one_hot_encoder(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y[..., c] = 1.0 where int64(X) (truncated; NaN reads as 0) is category c. An unknown category gives
    a row of zeros, also with zeros=0, where onnxruntime fails the run instead (an artifact has no run-time errors)."""
    _refuse_strings(ctx, a, "cats_strings")
    x = a.inputs[0]
    cats = [int(c) for c in a.attr("cats_int64s", [])]
    if not cats:
        raise ctx.error("cats_int64s is empty")
    if len(set(cats)) != len(cats):
        raise ctx.error(f"cats_int64s {cats} repeats a category")
    if not (x.type.dtype.is_int or x.type.dtype.is_float):
        raise ctx.unsupported(f"X of type {x.type.dtype.value}")
    codes = ctx.convert(x, DType.I64)
    shape = x.type.shape + (len(cats),)
    table = ctx.broadcast_in_dims(ctx.constant(np.asarray(cats, dtype=np.int64)), shape, (x.type.rank,))
    hit = ctx.op("compare", [ctx.broadcast_in_dims(codes, shape, tuple(range(x.type.rank))), table], direction="eq")
    return [ctx.convert(hit, DType.F32)]


# -- LabelEncoder ----------------------------------------------------------------------
def _tensor_attr(a: NodeArgs, name: str) -> np.ndarray | None:
    value = a.attr(name)
    if isinstance(value, onnx.TensorProto):
        if value.data_type == onnx.TensorProto.STRING:
            return None
        return numpy_helper.to_array(value).reshape(-1)
    return None


def _label_table(ctx: Ctx, a: NodeArgs, kind: str) -> tuple[np.ndarray, DType]:
    """keys or values: from `{kind}_int64s`, `{kind}_floats` or `{kind}_tensor`, with their dtype."""
    _refuse_strings(ctx, a, f"{kind}_strings")
    tensor = a.attr(f"{kind}_tensor")
    if isinstance(tensor, onnx.TensorProto):
        if tensor.data_type == onnx.TensorProto.STRING:
            raise ctx.unsupported(f"string {kind}_tensor: aot compiles no string tensors")
        dtype = to_dtype(tensor.data_type, f"{kind}_tensor")
        return numpy_helper.to_array(tensor).reshape(-1).astype(dtype.to_numpy()), dtype
    if a.attr(f"{kind}_int64s"):
        return np.asarray(a.attr(f"{kind}_int64s"), dtype=np.int64), DType.I64
    if a.attr(f"{kind}_floats"):
        return np.asarray(a.attr(f"{kind}_floats"), dtype=np.float32), DType.F32
    raise ctx.error(f"no {kind}: give {kind}_int64s, {kind}_floats or {kind}_tensor")


def _label_default(ctx: Ctx, a: NodeArgs, dtype: DType) -> np.ndarray:
    tensor = _tensor_attr(a, "default_tensor")
    if tensor is not None and tensor.size:
        return tensor[:1].astype(dtype.to_numpy())
    if dtype.is_int:
        return np.asarray([a.attr("default_int64", -1)], dtype=dtype.to_numpy())
    return np.asarray([a.attr("default_float", -0.0)], dtype=dtype.to_numpy())


@op("LabelEncoder")
def _label_encoder(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y = values[k] for the first k with keys[k] == X (NaN keys match NaN), else the default.

    The first match is the least k where the key hits: a min over a one-hot row of
    positions, then one gather from the values with the default appended.
    """
    x = a.inputs[0]
    keys, key_dtype = _label_table(ctx, a, "keys")
    values, value_dtype = _label_table(ctx, a, "values")
    if keys.size != values.size:
        raise ctx.error(f"{keys.size} keys but {values.size} values")
    if key_dtype.is_float != x.type.dtype.is_float:
        raise ctx.error(f"keys of type {key_dtype.value} cannot match X of type {x.type.dtype.value}")
    keys = keys.astype(x.type.dtype.to_numpy())
    table = np.concatenate([values, _label_default(ctx, a, value_dtype)])
    count = keys.size
    shape = x.type.shape + (count,)
    rank = x.type.rank
    hits = ctx.op("compare", [ctx.broadcast_in_dims(x, shape, tuple(range(rank))),
                              ctx.broadcast_in_dims(ctx.constant(keys), shape, (rank,))], direction="eq")
    position = ctx.op("iota", [], shape=shape, dim=rank, dtype=DType.I32)
    found = ctx.reduce(ctx.op("select", [hits, position, ctx.full(count, position.type)]), "min", (rank,))
    nan_keys = np.flatnonzero(np.isnan(keys)) if key_dtype.is_float else np.array([], dtype=np.int64)
    if nan_keys.size:
        # NaN never compares equal: a NaN element takes the first NaN key
        is_nan = ctx.op("compare", [x, x], direction="ne")
        found = ctx.op("select", [is_nan, ctx.full(int(nan_keys[0]), found.type), found])
    return [gather_1d(ctx, ctx.constant(table), found)]


# -- linear models ---------------------------------------------------------------------
def _linear_scores(ctx: Ctx, x: Value, coefficients: list[float], intercepts: list[float] | None, count: int) -> Value:
    """X [N, F] (float32) times coefficients [count, F] transposed, plus intercepts: [N, count]."""
    features = x.type.shape[1]
    if len(coefficients) != count * features:
        raise ctx.error(f"{len(coefficients)} coefficients do not fill {count} row(s) of {features} features")
    weights = ctx.constant(np.asarray(coefficients, dtype=np.float32).reshape(count, features))
    y = ctx.op("dot", [x, weights], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(1,))
    if intercepts is not None:
        y = ctx.op("add", [y, ctx.broadcast_to(ctx.constant(np.asarray(intercepts, dtype=np.float32)), y.type.shape)])
    return y


def _x_rows_f32(ctx: Ctx, x: Value) -> Value:
    return as_rows(ctx, ctx.convert(_float_input(ctx, x), DType.F32))


@op("LinearRegressor")
def _linear_regressor(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y = post_transform(X coefficients^T + intercepts) [N, targets] (onnxruntime skips all but PROBIT
    on one target: microsoft/onnxruntime#26596; the ONNX-ML text does not)."""
    x = _x_rows_f32(ctx, a.inputs[0])
    targets = int(a.attr("targets", 1))
    if targets < 1:
        raise ctx.error(f"targets must be positive, got {targets}")
    intercepts = list(a.attr("intercepts", []))
    # onnxruntime adds the intercepts only when there is one per target
    y = _linear_scores(ctx, x, list(a.attr("coefficients", [])), intercepts if len(intercepts) == targets else None, targets)
    return [post_transform(ctx, y, check_post_transform(ctx, a.attr("post_transform", "NONE")))]


@op("LinearClassifier")
def _linear_classifier(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Scores X coefficients^T + intercepts [N, E]; label = classlabels[first argmax] on the raw scores.

    With one score column (E = 1) the label is the second class where the raw score s
    is positive. Two class labels then widen the scores to two columns as onnxruntime
    does, [1 - s, s], or [logistic(-s), logistic(s)] under LOGISTIC (onnxruntime drops
    the sigmoid there, as for trees: microsoft/onnxruntime#27533); other transforms of
    one widened column are refused.
    """
    _refuse_strings(ctx, a, "classlabels_strings")
    x = _x_rows_f32(ctx, a.inputs[0])
    labels = [int(v) for v in a.attr("classlabels_ints", [])]
    intercepts = list(a.attr("intercepts", []))
    coefficients = list(a.attr("coefficients", []))
    count = len(intercepts) if intercepts else len(coefficients) // max(x.type.shape[1], 1)
    if count < 1:
        raise ctx.error("no intercepts or coefficients: the classifier has no score column")
    scores = _linear_scores(ctx, x, coefficients, intercepts or None, count)
    kind = check_post_transform(ctx, a.attr("post_transform", "NONE"))
    if count > 1:
        if len(labels) != count:
            raise ctx.error(f"{count} score columns need as many classlabels_ints, got {len(labels)}")
        return [take_labels(ctx, labels, first_argmax(ctx, scores)), post_transform(ctx, scores, kind)]
    negative, positive = (labels[0], labels[1]) if len(labels) == 2 else (0, 1)
    column = ctx.reshape(scores, (scores.type.shape[0],))
    above = ctx.op("compare", [column, ctx.full(0.0, column.type)], direction="gt")
    label_type = column.type.with_dtype(DType.I64)
    label = ctx.op("select", [above, ctx.full(positive, label_type), ctx.full(negative, label_type)])
    if len(labels) != 2:
        return [label, post_transform(ctx, scores, kind)]
    if kind == "LOGISTIC":
        pair = [ctx.op("logistic", [ctx.op("neg", [scores])]), ctx.op("logistic", [scores])]
    elif kind == "NONE":
        pair = [ctx.op("sub", [ctx.full(1.0, scores.type), scores]), scores]
    else:
        raise ctx.unsupported(f"{kind} on one score column with two class labels (onnxruntime leaves it undefined)")
    return [label, ctx.op("concat", pair, axis=1)]


@op("ZipMap")
def _zip_map(ctx: Ctx, a: NodeArgs) -> list[Value]:
    raise ctx.unsupported("ZipMap outputs a sequence of maps, which aot does not compile; export the classifier "
                          "without it: skl2onnx.to_onnx(model, X, options={'zipmap': False}) gives a probability tensor")
