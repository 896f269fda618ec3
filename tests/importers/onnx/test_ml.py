"""ai.onnx.ml pipelines (skl2onnx output and hand-built attribute cases): compiled by aot, run by the
C runtime, compared with onnxruntime.

scikit-learn models are trained on data sklearn ships (iris, breast cancer, diabetes, digits) and
exported with `zipmap=False`. Hand-built models cover what sklearn never writes (branch modes,
missing values, MIN/MAX/AVERAGE, TreeEnsemble of opset 5, set membership); each group of cases
is one model with one output per case, compiled once. Where aot follows the ONNX-ML text over a
reported onnxruntime bug, the expectation is derived from onnxruntime's untransformed output.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.errors import UnsupportedError

ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(11)


# -- running -------------------------------------------------------------------------------
def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_aot(model: onnx.ModelProto, feeds: dict[str, np.ndarray], path) -> list[np.ndarray]:
    aot.compile(model, path, shapes={name: value.shape for name, value in feeds.items()})
    return aot.Session(path).run(None, feeds)


def assert_close(name: str, got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


def assert_labels(name: str, got: np.ndarray, want: np.ndarray, scores: np.ndarray) -> None:
    """Labels equal, except on rows whose two best scores tie within rounding (sums in another order)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.dtype, want.dtype)
    top = np.sort(scores, axis=1)[:, -2:]
    near_tie = (top[:, 1] - top[:, 0]) <= 1e-5
    wrong = (got != want) & ~near_tie
    assert not wrong.any(), f"{name}: labels differ on rows {np.flatnonzero(wrong)[:10]}"


# -- scikit-learn pipelines ----------------------------------------------------------------------
@dataclass(frozen=True)
class SklearnCase:
    data: str  # iris | breast_cancer | diabetes | digits | categories
    estimator: str  # what make_estimator builds
    targets: int = 1  # regressors: columns of y
    ml_opset: int | None = None  # the ai.onnx.ml opset to export for, where skl2onnx's default fails


SKLEARN_CASES = {
    "scaler_logistic_multiclass": SklearnCase("iris", "scaler_logistic"),
    "scaler_logistic_binary": SklearnCase("breast_cancer", "scaler_logistic"),
    "scaler_normalizer_max": SklearnCase("iris", "scaler_normalizer_max"),
    "normalizer_l1_binarizer": SklearnCase("diabetes", "normalizer_l1_binarizer"),
    "imputer_scaler_linear": SklearnCase("diabetes", "imputer_scaler_linear"),
    "linear_two_targets": SklearnCase("diabetes", "linear", targets=2),
    "onehot_logistic": SklearnCase("categories", "onehot_logistic"),
    "tree_classifier": SklearnCase("iris", "tree_classifier"),
    "tree_classifier_binary": SklearnCase("breast_cancer", "tree_classifier"),
    "tree_regressor": SklearnCase("diabetes", "tree_regressor"),
    "forest_classifier_digits": SklearnCase("digits", "forest_classifier"),
    "forest_regressor_two_targets": SklearnCase("diabetes", "forest_regressor", targets=2),
    "boosting_classifier": SklearnCase("iris", "boosting_classifier"),
    "boosting_classifier_binary": SklearnCase("breast_cancer", "boosting_classifier"),
    "boosting_regressor": SklearnCase("diabetes", "boosting_regressor"),
    "extra_trees_classifier": SklearnCase("iris", "extra_trees_classifier"),
    "extra_trees_regressor": SklearnCase("diabetes", "extra_trees_regressor"),
    "isolation_forest": SklearnCase("breast_cancer", "isolation_forest", ml_opset=3),  # trees + LabelEncoder
}


def load_data(name: str, targets: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    if name == "categories":
        x = RNG.integers(0, 4, size=(120, 3)).astype(np.int64)
        return x, (x[:, 0] + x[:, 1] * (x[:, 2] > 1)) % 3
    loader = {"iris": datasets.load_iris, "breast_cancer": datasets.load_breast_cancer,
              "diabetes": datasets.load_diabetes, "digits": datasets.load_digits}[name]
    x, y = loader(return_X_y=True)
    x = x.astype(np.float32)
    if name == "diabetes" and targets == 2:
        y = np.stack([y, x[:, 0] * 100.0 - y], axis=1)
    return x, y


def make_estimator(kind: str):
    from sklearn import ensemble, impute, linear_model, pipeline, preprocessing, tree

    builders = {
        "scaler_logistic": lambda: pipeline.make_pipeline(preprocessing.StandardScaler(),
                                                          linear_model.LogisticRegression(max_iter=2000)),
        "scaler_normalizer_max": lambda: pipeline.make_pipeline(preprocessing.StandardScaler(),
                                                                preprocessing.Normalizer("max")),
        "normalizer_l1_binarizer": lambda: pipeline.make_pipeline(preprocessing.Normalizer("l1"),
                                                                  preprocessing.Binarizer(threshold=0.01)),
        "imputer_scaler_linear": lambda: pipeline.make_pipeline(impute.SimpleImputer(), preprocessing.StandardScaler(),
                                                                linear_model.LinearRegression()),
        "linear": linear_model.LinearRegression,
        "onehot_logistic": lambda: pipeline.make_pipeline(preprocessing.OneHotEncoder(handle_unknown="ignore"),
                                                          linear_model.LogisticRegression(max_iter=1000)),
        "tree_classifier": lambda: tree.DecisionTreeClassifier(max_depth=4, random_state=0),
        "tree_regressor": lambda: tree.DecisionTreeRegressor(max_depth=5, random_state=0),
        "forest_classifier": lambda: ensemble.RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0),
        "forest_regressor": lambda: ensemble.RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0),
        "boosting_classifier": lambda: ensemble.GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0),
        "boosting_regressor": lambda: ensemble.GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0),
        "extra_trees_classifier": lambda: ensemble.ExtraTreesClassifier(n_estimators=5, max_depth=4, random_state=0),
        "extra_trees_regressor": lambda: ensemble.ExtraTreesRegressor(n_estimators=5, max_depth=4, random_state=0),
        "isolation_forest": lambda: ensemble.IsolationForest(n_estimators=5, random_state=0),
    }
    return builders[kind]()


def export(estimator, x: np.ndarray, **options) -> onnx.ModelProto:
    from skl2onnx import to_onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skl2onnx warns about opset choices it makes
        return to_onnx(estimator, x[:1], **options)


def needs_sklearn() -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("skl2onnx")


@pytest.mark.parametrize("case", sorted(SKLEARN_CASES))
def test_sklearn_pipeline_matches_onnxruntime(case, tmp_path):
    needs_sklearn()
    spec = SKLEARN_CASES[case]
    x, y = load_data(spec.data, spec.targets)
    estimator = make_estimator(spec.estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the small fits
        estimator.fit(x, y)
    if spec.estimator == "imputer_scaler_linear":
        x = x.copy()
        x[RNG.random(x.shape) < 0.1] = np.nan  # the imputer's means fill these
    options = {"zipmap": False} if hasattr(estimator, "predict_proba") else None
    opsets = {"": 17, "ai.onnx.ml": spec.ml_opset} if spec.ml_opset else None
    model = export(estimator, x, options=options, target_opset=opsets)
    feeds = {model.graph.input[0].name: x}
    got = run_aot(model, feeds, tmp_path / f"{case}.aot")
    want = run_onnxruntime(model, feeds)
    names = [o.name for o in model.graph.output]
    assert len(got) == len(want)
    if hasattr(estimator, "predict_proba"):
        (label, probabilities), (want_label, want_probabilities) = got, want
        assert_close(f"{case}: {names[1]}", probabilities, want_probabilities)
        assert_labels(f"{case}: {names[0]}", label, want_label, want_probabilities)
        return
    for name, g, w in zip(names, got, want):
        assert_close(f"{case}: {name}", g, w, rtol=1e-5, atol=1e-4 * max(1.0, float(np.abs(w).max())))


def test_zipmap_is_refused_with_the_export_option_that_removes_it(tmp_path):
    needs_sklearn()
    x, y = load_data("iris", 1)
    model = export(make_estimator("tree_classifier").fit(x, y), x)  # ZipMap by default
    with pytest.raises(UnsupportedError, match=r"ZipMap.*options=\{'zipmap': False\}"):
        aot.compile(model, tmp_path / "zipmap.aot", shapes={model.graph.input[0].name: x.shape})


def test_string_class_labels_are_refused_with_advice(tmp_path):
    needs_sklearn()
    x, y = load_data("iris", 1)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = export(make_estimator("tree_classifier").fit(x, names), x, options={"zipmap": False})
    with pytest.raises(UnsupportedError, match="string class labels.*integer labels"):
        aot.compile(model, tmp_path / "strings.aot", shapes={model.graph.input[0].name: x.shape})


# -- hand-built models ---------------------------------------------------------------------
# A tree is a leaf {target: weight} or a branch (mode, feature, threshold, missing_true, if_true, if_false);
# a BRANCH_MEMBER branch has a tuple of members as its threshold.
Tree = dict | tuple

TREES: list[Tree] = [
    ("BRANCH_LEQ", 0, 1.0, 1,
     ("BRANCH_LT", 1, 0.5, 0, {0: 1.0, 1: 0.25}, {0: -2.0, 1: 0.5}),
     ("BRANCH_GTE", 2, 1.5, 1, {0: 3.0}, ("BRANCH_EQ", 1, 1.0, 0, {0: 0.75, 1: -1.0}, {1: 2.0}))),
    ("BRANCH_GT", 1, 1.0, 0,
     ("BRANCH_NEQ", 0, 0.5, 1, {0: 0.5, 1: 1.5}, {0: -1.5}),
     {0: 2.5, 1: -0.5}),
    {0: 0.125, 1: 0.25},  # a tree that is one leaf
]
# the same shapes with weights in (0, 1) for PROBIT and for class probabilities
PROBABILITY_TREES: list[Tree] = [
    ("BRANCH_LEQ", 0, 1.0, 1,
     ("BRANCH_LT", 1, 0.5, 0, {0: 0.2, 1: 0.8}, {0: 0.6, 1: 0.4}),
     ("BRANCH_GTE", 2, 1.5, 1, {0: 0.9, 1: 0.1}, {0: 0.3, 1: 0.7})),
    ("BRANCH_GT", 1, 1.0, 0, {0: 0.45, 1: 0.55}, {0: 0.7, 1: 0.3}),
]
MEMBER_TREE: Tree = ("BRANCH_MEMBER", 2, (0.0, 1.5, 2.0), 1,
                     ("BRANCH_LEQ", 0, 0.5, 0, {0: 1.0}, {1: 2.0}), {0: -1.0, 1: 0.5})


def tree_input(rows: int = 48) -> np.ndarray:
    """Features on a grid that hits the thresholds exactly (LEQ vs LT, EQ vs NEQ), and some NaNs."""
    x = RNG.choice(np.array([0.0, 0.5, 1.0, 1.5, 2.0], dtype=np.float32), size=(rows, 3))
    x[RNG.random(x.shape) < 0.15] = np.nan
    return x


def _v3_attrs(trees: list[Tree], prefix: str) -> dict:
    """TreeEnsembleRegressor/Classifier node and leaf attributes; node ids in preorder per tree."""
    nodes: dict[str, list] = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_modes", "nodes_featureids",
                                              "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                                              "nodes_missing_value_tracks_true")}
    leaves: dict[str, list] = {f"{prefix}_{k}": [] for k in ("treeids", "nodeids", "ids", "weights")}

    def add(tree_id: int, tree: Tree) -> int:
        node_id = sum(1 for t in nodes["nodes_treeids"] if t == tree_id)
        row = len(nodes["nodes_treeids"])
        for key, value in (("nodes_treeids", tree_id), ("nodes_nodeids", node_id)):
            nodes[key].append(value)
        if isinstance(tree, dict):
            for key, value in (("nodes_modes", "LEAF"), ("nodes_featureids", 0), ("nodes_values", 0.0),
                               ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0), ("nodes_missing_value_tracks_true", 0)):
                nodes[key].append(value)
            for target, weight in tree.items():
                for key, value in (("treeids", tree_id), ("nodeids", node_id), ("ids", target), ("weights", weight)):
                    leaves[f"{prefix}_{key}"].append(value)
            return node_id
        mode, feature, threshold, missing, if_true, if_false = tree
        for key, value in (("nodes_modes", mode), ("nodes_featureids", feature), ("nodes_values", threshold),
                           ("nodes_missing_value_tracks_true", missing)):
            nodes[key].append(value)
        nodes["nodes_truenodeids"].append(0)
        nodes["nodes_falsenodeids"].append(0)
        nodes["nodes_truenodeids"][row] = add(tree_id, if_true)
        nodes["nodes_falsenodeids"][row] = add(tree_id, if_false)
        return node_id

    for tree_id, tree in enumerate(trees):
        add(tree_id, tree)
    return {**nodes, **leaves}


def _v5_attrs(trees: list[Tree], dtype=np.float32) -> dict:
    """TreeEnsemble (opset 5) attributes: branches in nodes_*, leaves in leaf_*."""
    modes = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")
    nodes: dict[str, list] = {k: [] for k in ("featureids", "modes", "splits", "missing", "true", "trueleaf",
                                              "false", "falseleaf")}
    leaf_targets: list[int] = []
    leaf_weights: list[float] = []
    members: list[float] = []

    def add_leaf(leaf: dict) -> int:
        (target, weight), = leaf.items()
        leaf_targets.append(target)
        leaf_weights.append(weight)
        return len(leaf_targets) - 1

    def add(tree: Tree) -> tuple[int, int]:
        """(position, 1 if a leaf)"""
        if isinstance(tree, dict):
            return add_leaf(tree), 1
        mode, feature, threshold, missing, if_true, if_false = tree
        row = len(nodes["modes"])
        for key, value in (("featureids", feature), ("modes", modes.index(mode)), ("missing", missing),
                           ("splits", 0.0 if mode == "BRANCH_MEMBER" else threshold)):
            nodes[key].append(value)
        if mode == "BRANCH_MEMBER":
            members.extend(list(threshold) + [np.nan])
        for key in ("true", "trueleaf", "false", "falseleaf"):
            nodes[key].append(0)
        nodes["true"][row], nodes["trueleaf"][row] = add(if_true)
        nodes["false"][row], nodes["falseleaf"][row] = add(if_false)
        return row, 0

    roots = []
    for tree in trees:
        if isinstance(tree, dict):  # one leaf: a branch whose two sides are that leaf
            tree = ("BRANCH_LEQ", 0, 0.0, 0, tree, tree)
        roots.append(add(tree)[0])
    attrs = dict(nodes_featureids=nodes["featureids"], nodes_truenodeids=nodes["true"],
                 nodes_trueleafs=nodes["trueleaf"], nodes_falsenodeids=nodes["false"],
                 nodes_falseleafs=nodes["falseleaf"], nodes_missing_value_tracks_true=nodes["missing"],
                 nodes_modes=numpy_helper.from_array(np.asarray(nodes["modes"], dtype=np.uint8)),
                 nodes_splits=numpy_helper.from_array(np.asarray(nodes["splits"], dtype=dtype)),
                 leaf_targetids=leaf_targets, leaf_weights=numpy_helper.from_array(np.asarray(leaf_weights, dtype=dtype)),
                 tree_roots=roots)
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.asarray(members, dtype=dtype))
    return attrs


def _one_target_per_leaf(trees: list[Tree]) -> list[Tree]:
    """The trees with each leaf keeping its first entry only (a TreeEnsemble leaf scores one target)."""
    def strip(tree: Tree) -> Tree:
        if isinstance(tree, dict):
            return dict([next(iter(tree.items()))])
        mode, feature, threshold, missing, if_true, if_false = tree
        return (mode, feature, threshold, missing, strip(if_true), strip(if_false))
    return [strip(t) for t in trees]


ONE_TARGET_TREES: list[Tree] = [
    ("BRANCH_LEQ", 0, 1.0, 1, ("BRANCH_LT", 1, 0.5, 0, {0: 1.5}, {0: 0.25}), {0: -0.5}),
    ("BRANCH_GT", 2, 0.5, 0, {0: 1.0}, {0: 2.0}),
]


def ml_model(nodes: list[onnx.NodeProto], x: np.ndarray, outputs: list[str], ml_opset: int,
             float_outputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    """One model over input X; `float_outputs` are outputs ONNX cannot type (Scaler, Normalizer of integers)."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info("X", elem, list(x.shape))],
                              [helper.make_empty_tensor_value_info(name) for name in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    model.ir_version = 10
    model = onnx.shape_inference.infer_shapes(model)  # types the outputs
    for output in model.graph.output:
        if not output.type.HasField("tensor_type"):  # no type rule (Imputer; Scaler, Normalizer of integers)
            known = TensorProto.FLOAT if output.name in float_outputs else elem
            output.CopyFrom(helper.make_tensor_value_info(output.name, known, None))
    return model


def regressor(name: str, trees: list[Tree], targets: int = 2, **attrs) -> onnx.NodeProto:
    return helper.make_node("TreeEnsembleRegressor", ["X"], [name], domain="ai.onnx.ml", n_targets=targets,
                            **_v3_attrs(trees, "target"), **attrs)


def classifier(name: str, trees: list[Tree], labels: list[int], **attrs) -> onnx.NodeProto:
    return helper.make_node("TreeEnsembleClassifier", ["X"], [f"{name}_label", f"{name}_scores"], domain="ai.onnx.ml",
                            classlabels_int64s=labels, **_v3_attrs(trees, "class"), **attrs)


def ensemble(name: str, trees: list[Tree], aggregate: int = 1, post: int = 0, targets: int = 2) -> onnx.NodeProto:
    return helper.make_node("TreeEnsemble", ["X"], [name], domain="ai.onnx.ml", n_targets=targets,
                            aggregate_function=aggregate, post_transform=post, **_v5_attrs(trees))


def compare_group(model: onnx.ModelProto, x: np.ndarray, path, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    got = run_aot(model, {"X": x}, path)
    want = run_onnxruntime(model, {"X": x})
    for output, g, w in zip(model.graph.output, got, want):
        assert_close(output.name, g, w, rtol=rtol, atol=atol)


REGRESSOR_CASES = {
    "sum_base": dict(aggregate_function="SUM", base_values=[0.5, -1.0]),
    "average": dict(aggregate_function="AVERAGE"),
    "min": dict(aggregate_function="MIN", base_values=[1.0, 2.0]),  # some leaves lack target 1: it stays 0 + base
    "max": dict(aggregate_function="MAX"),
    "softmax": dict(post_transform="SOFTMAX"),
    "softmax_zero": dict(post_transform="SOFTMAX_ZERO"),
    "logistic": dict(post_transform="LOGISTIC", base_values=[0.25, 0.5]),
}


def test_tree_regressor_modes_missing_values_and_aggregates(tmp_path):
    """Every branch mode, NaN routed by missing_value_tracks_true, SUM/AVERAGE/MIN/MAX, base values, post transforms."""
    x = tree_input()
    nodes = [regressor(name, TREES, **attrs) for name, attrs in REGRESSOR_CASES.items()]
    nodes.append(regressor("probit", PROBABILITY_TREES, aggregate_function="AVERAGE", post_transform="PROBIT"))
    nodes.append(regressor("one_target", ONE_TARGET_TREES, targets=1, base_values=[0.75]))
    nodes.append(regressor("one_target_min", ONE_TARGET_TREES, targets=1, aggregate_function="MIN"))
    nodes.append(regressor("one_target_probit", [PROBABILITY_TREES[1]], targets=2, post_transform="PROBIT"))
    model = ml_model(nodes, x, [n.output[0] for n in nodes], ml_opset=3)
    compare_group(model, x, tmp_path / "regressors.aot", rtol=1e-4)


def test_trees_on_double_and_integer_input(tmp_path):
    """double X compares and sums in double; integer X (classifier only in onnxruntime) compares as float."""
    for dtype in (np.float64, np.int64):
        x = np.nan_to_num(tree_input() * 2.0).astype(dtype)
        nodes = [classifier("c", CLASSIFIER_TREES, [0, 1, 2], base_values=[0.1, -0.2, 0.3], post_transform="SOFTMAX")]
        if dtype == np.float64:
            nodes.append(regressor("r", TREES, base_values=[0.5, -1.0]))
        model = ml_model(nodes, x, [o for n in nodes for o in n.output], ml_opset=3)
        compare_group(model, x, tmp_path / f"{np.dtype(dtype).name}.aot")


def test_tree_ensemble_opset5_modes_membership_and_aggregates(tmp_path):
    """TreeEnsemble: the same trees (one target per leaf), a BRANCH_MEMBER tree, each aggregate, codes 0, 3, 4."""
    x = tree_input()
    trees = _one_target_per_leaf(TREES + [MEMBER_TREE])
    nodes = [ensemble(f"aggregate_{code}", trees, aggregate=code) for code in range(4)]
    nodes.append(ensemble("softmax_zero", trees, post=3))
    nodes.append(ensemble("probit", _one_target_per_leaf(PROBABILITY_TREES), aggregate=0, post=4))
    model = ml_model(nodes, x, [n.output[0] for n in nodes], ml_opset=5)
    compare_group(model, x, tmp_path / "ensembles.aot", rtol=1e-4)


def test_tree_ensemble_opset5_post_transform_codes_follow_the_onnx_text(tmp_path):
    """1 = SOFTMAX, 2 = LOGISTIC in the ONNX-ML text; onnxruntime reads the two codes swapped."""
    x = tree_input()
    trees = _one_target_per_leaf(TREES)
    nodes = [ensemble("code_1", trees, post=1), ensemble("code_2", trees, post=2)]
    model = ml_model(nodes, x, ["code_1", "code_2"], ml_opset=5)
    got = run_aot(model, {"X": x}, tmp_path / "codes.aot")
    swapped = ml_model([ensemble("code_1", trees, post=2), ensemble("code_2", trees, post=1)], x,
                       ["code_1", "code_2"], ml_opset=5)
    want = run_onnxruntime(swapped, {"X": x})
    assert_close("SOFTMAX (1)", got[0], want[0])
    assert_close("LOGISTIC (2)", got[1], want[1])


def test_one_target_post_transform_follows_the_onnx_text(tmp_path):
    """onnxruntime applies only PROBIT to a single target (microsoft/onnxruntime#26596): logistic of its raw score."""
    x = tree_input()
    node = regressor("y", ONE_TARGET_TREES, targets=1, post_transform="LOGISTIC")
    got = run_aot(ml_model([node], x, ["y"], ml_opset=3), {"X": x}, tmp_path / "logistic.aot")
    (raw,) = run_onnxruntime(ml_model([regressor("y", ONE_TARGET_TREES, targets=1)], x, ["y"], ml_opset=3), {"X": x})
    assert_close("logistic", got[0], (1.0 / (1.0 + np.exp(-raw.astype(np.float64)))).astype(np.float32))


CLASSIFIER_TREES: list[Tree] = [
    ("BRANCH_LEQ", 0, 1.0, 1,
     ("BRANCH_LT", 1, 0.5, 0, {0: 0.5, 1: 0.25, 2: 0.25}, {1: 0.6, 2: 0.4}),
     ("BRANCH_GTE", 2, 1.5, 1, {0: 0.1, 1: 0.1, 2: 0.8}, {2: 1.0})),
    ("BRANCH_GT", 1, 1.0, 0, {0: 0.3, 1: 0.7}, {0: 0.2, 1: 0.2, 2: 0.6}),
]
BINARY_TREES: list[Tree] = [  # class 1 scored on some paths only: the one-column / two-column switch per row
    ("BRANCH_LEQ", 0, 1.0, 1, {0: 0.75, 1: 0.25}, ("BRANCH_LT", 1, 0.5, 0, {0: 0.4}, {0: -0.2, 1: 0.9})),
    ("BRANCH_GT", 2, 0.5, 0, {0: -0.3}, {0: 0.6}),
]
MARGIN_TREES: list[Tree] = [  # one weight column of mixed signs (gradient boosting's binary export)
    ("BRANCH_LEQ", 0, 1.0, 1, {0: 0.75}, ("BRANCH_LT", 1, 0.5, 0, {0: -1.25}, {0: 0.5})),
    ("BRANCH_GT", 2, 0.5, 0, {0: -0.3}, {0: 0.6}),
]
PROBABILITY_COLUMN_TREES: list[Tree] = [  # one weight column, all >= 0 (a decision tree's binary export)
    ("BRANCH_LEQ", 0, 1.0, 1, {0: 0.75}, ("BRANCH_LT", 1, 0.5, 0, {0: 0.2}, {0: 0.55})),
]
CLASS_ONE_COLUMN_TREES: list[Tree] = [  # one weight column, for class 1: class 0 shows 0
    ("BRANCH_LEQ", 0, 1.0, 1, {1: 0.75}, ("BRANCH_LT", 1, 0.5, 0, {1: -0.2}, {1: 0.55})),
]


def test_tree_classifier_label_and_score_rules(tmp_path):
    """Three classes with unscored classes per row, base values and each post transform; the binary forms."""
    x = tree_input()
    nodes = [
        classifier("multi", CLASSIFIER_TREES, [3, 5, 7]),
        classifier("multi_base_softmax", CLASSIFIER_TREES, [0, 1, 2], base_values=[0.1, -0.2, 0.3], post_transform="SOFTMAX"),
        classifier("multi_logistic", CLASSIFIER_TREES, [0, 1, 2], post_transform="LOGISTIC"),
        classifier("multi_softmax_zero", CLASSIFIER_TREES, [0, 1, 2], post_transform="SOFTMAX_ZERO"),
        classifier("two_columns", BINARY_TREES, [0, 1]),
        classifier("two_columns_logistic", BINARY_TREES, [0, 1], post_transform="LOGISTIC"),
        classifier("two_base_values", BINARY_TREES, [0, 1], base_values=[0.5, -0.25]),
        classifier("margins_logistic", MARGIN_TREES, [4, 9], base_values=[0.1], post_transform="LOGISTIC"),
        classifier("margins_raw", MARGIN_TREES, [4, 9]),
        classifier("probability_column", PROBABILITY_COLUMN_TREES, [4, 9]),
        classifier("class_one_column_logistic", CLASS_ONE_COLUMN_TREES, [4, 9], post_transform="LOGISTIC"),
    ]
    outputs = [name for n in nodes for name in n.output]
    model = ml_model(nodes, x, outputs, ml_opset=3)
    got = run_aot(model, {"X": x}, tmp_path / "classifiers.aot")
    want = run_onnxruntime(model, {"X": x})
    for i in range(0, len(outputs), 2):
        assert_close(outputs[i + 1], got[i + 1], want[i + 1], rtol=1e-5)
        assert_labels(outputs[i], got[i], want[i], want[i + 1])


def test_probability_column_with_logistic_is_read_as_margins(tmp_path):
    """onnxruntime skips the sigmoid of an all-positive one-column binary ensemble (microsoft/onnxruntime#27533):
    aot gives [logistic(-s), logistic(s)] and decides the label at s > 0, s read from onnxruntime's raw scores."""
    x = tree_input()
    node = classifier("c", PROBABILITY_COLUMN_TREES, [4, 9], post_transform="LOGISTIC")
    label, scores = run_aot(ml_model([node], x, list(node.output), ml_opset=3), {"X": x}, tmp_path / "c.aot")
    raw_node = classifier("c", PROBABILITY_COLUMN_TREES, [4, 9])
    _, raw = run_onnxruntime(ml_model([raw_node], x, list(raw_node.output), ml_opset=3), {"X": x})
    s = raw[:, 1].astype(np.float64)
    expected = np.stack([1 / (1 + np.exp(s)), 1 / (1 + np.exp(-s))], axis=1).astype(np.float32)
    assert_close("scores", scores, expected)
    np.testing.assert_array_equal(label, np.where(s > 0, 9, 4))


# -- the other ai.onnx.ml ops ---------------------------------------------------------------------
def ml_node(op: str, output: str, inputs: tuple[str, ...] = ("X",), **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), [output], domain="ai.onnx.ml", **attrs)


def test_feature_ops_on_float_input(tmp_path):
    x = RNG.standard_normal((7, 5)).astype(np.float32)
    x[2] = 0.0  # a zero row: the normalizers leave it as it is
    x[4, 1] = np.nan
    indices = helper.make_tensor("indices", TensorProto.INT64, [3], [4, 0, 4])
    ready = ("imputed",)  # onnxruntime fails Binarizer on NaN and casts NaN to int64 unspecified
    nodes = [
        ml_node("Imputer", "imputed", imputed_value_floats=[1.0, 2.0, 3.0, 4.0, 5.0], replaced_value_float=np.nan),
        ml_node("Imputer", "imputed_zero", imputed_value_floats=[9.0], replaced_value_float=0.0),
        ml_node("Scaler", "scaled", scale=[2.0, 1.0, 0.5, 3.0, 1.5], offset=[0.1, 0.0, -0.2, 1.0, 0.5]),
        ml_node("Scaler", "scaled_one", scale=[2.0], offset=[0.5]),
        ml_node("Normalizer", "max", ready, norm="MAX"),
        ml_node("Normalizer", "l1", ready, norm="L1"),
        ml_node("Normalizer", "l2", ready, norm="L2"),
        ml_node("Binarizer", "binary", ready, threshold=0.25),
        ml_node("Binarizer", "binary_default", ready),
        helper.make_node("Constant", [], ["indices"], value=indices),
        ml_node("ArrayFeatureExtractor", "picked", ("X", "indices")),
        ml_node("OneHotEncoder", "onehot", ready, cats_int64s=[0, 1, -1, 3], zeros=1),
        ml_node("LinearRegressor", "linear", ready, coefficients=list(RNG.standard_normal(10)), intercepts=[0.5, -0.5],
                targets=2, post_transform="SOFTMAX"),
        helper.make_node("LinearClassifier", ["imputed"], ["lc_label", "lc_scores"], domain="ai.onnx.ml",
                         coefficients=list(RNG.standard_normal(15)), intercepts=[0.1, 0.2, -0.3], classlabels_ints=[2, 4, 6],
                         post_transform="SOFTMAX"),
        helper.make_node("LinearClassifier", ["imputed"], ["one_label", "one_scores"], domain="ai.onnx.ml",
                         coefficients=list(RNG.standard_normal(5)), intercepts=[0.1], classlabels_ints=[3, 8]),
    ]
    outputs = [o for n in nodes if n.op_type != "Constant" for o in n.output]
    model = ml_model(nodes, x, outputs, ml_opset=3)
    compare_group(model, x, tmp_path / "features.aot")


def test_feature_ops_on_integer_and_vector_input(tmp_path):
    x = RNG.integers(-3, 5, size=(6,)).astype(np.int64)
    nodes = [  # onnxruntime has no integer Binarizer or LinearRegressor
        ml_node("Scaler", "scaled", scale=[0.5], offset=[1.0]),
        ml_node("Imputer", "imputed", imputed_value_int64s=[7], replaced_value_int64=2),
        ml_node("OneHotEncoder", "onehot", cats_int64s=[4, -3, 0]),
        ml_node("LabelEncoder", "to_float", keys_int64s=[0, 2, 4, 2], values_floats=[0.5, 1.5, 2.5, 9.0], default_float=-7.0),
        ml_node("LabelEncoder", "to_int", keys_int64s=[-3, 1], values_int64s=[30, 10]),
        ml_node("Normalizer", "l2", norm="L2"),
    ]
    model = ml_model(nodes, x, [n.output[0] for n in nodes], ml_opset=2, float_outputs=("scaled", "l2"))
    compare_group(model, x, tmp_path / "integers.aot")


def test_label_encoder_float_keys_and_tensor_attributes(tmp_path):
    x = np.array([[0.5, np.nan, 2.0], [-1.0, 3.0, 0.5]], dtype=np.float32)
    keys = numpy_helper.from_array(np.array([0.5, 2.0, np.nan], dtype=np.float32), "keys")
    values = numpy_helper.from_array(np.array([10, 20, 30], dtype=np.int64), "values")
    default = numpy_helper.from_array(np.array([-5], dtype=np.int64), "default")
    nodes = [
        ml_node("LabelEncoder", "from_tensors", keys_tensor=keys, values_tensor=values, default_tensor=default),
        ml_node("LabelEncoder", "from_lists", keys_floats=[2.0, 3.0], values_floats=[0.25, 0.75]),
    ]
    model = ml_model(nodes, x, ["from_tensors", "from_lists"], ml_opset=4)
    compare_group(model, x, tmp_path / "labels.aot")


def test_linear_classifier_one_column_with_logistic_is_widened_as_margins(tmp_path):
    """[logistic(-s), logistic(s)] where onnxruntime writes [1 - s, s] on the raw score (as #27533 for trees)."""
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    attrs = dict(coefficients=[0.5, -1.0, 2.0], intercepts=[0.25], classlabels_ints=[0, 1])
    node = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", post_transform="LOGISTIC", **attrs)
    label, scores = run_aot(ml_model([node], x, ["label", "scores"], ml_opset=1), {"X": x}, tmp_path / "lc.aot")
    raw_node = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", **attrs)
    want_label, raw = run_onnxruntime(ml_model([raw_node], x, ["label", "scores"], ml_opset=1), {"X": x})
    s = raw[:, 1].astype(np.float64)
    assert_close("scores", scores, np.stack([1 / (1 + np.exp(s)), 1 / (1 + np.exp(-s))], axis=1).astype(np.float32))
    np.testing.assert_array_equal(label, want_label)


# -- refusals ---------------------------------------------------------------------------------------
def test_ml_ops_without_a_lowering_are_listed_by_domain(tmp_path):
    x = np.zeros((2, 3), dtype=np.float32)
    node = ml_node("SVMRegressor", "y", coefficients=[1.0], support_vectors=[0.0, 0.0, 0.0], rho=[0.0])
    model = ml_model([node], x, ["y"], ml_opset=3)
    with pytest.raises(UnsupportedError, match=r"SVMRegressor, domain 'ai.onnx.ml'"):
        aot.compile(model, tmp_path / "svm.aot", shapes={"X": x.shape})


def test_string_categories_are_refused_by_attribute(tmp_path):
    x = np.zeros((2,), dtype=np.int64)
    node = ml_node("LabelEncoder", "y", keys_int64s=[0, 1], values_strings=["a", "b"])
    model = ml_model([node], x, ["y"], ml_opset=2)
    with pytest.raises(UnsupportedError, match="values_strings.*no string tensors"):
        aot.compile(model, tmp_path / "strings.aot", shapes={"X": x.shape})
