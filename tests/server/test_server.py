"""The KServe v2 inference server (runtime_c/servers/aot_server.c), end to end.

The sample lenet and mlp are compiled to artifacts and served on loopback; tritonclient.http
(the real client) drives it from several threads in JSON and binary modes, and every answer
is checked against aot.Session on the same artifact. Raw sockets send what a client library
never would (bad JSON, wrong shapes and datatypes, oversized and chunked bodies, garbage,
truncated binary data, a client that stalls half-way), and after each the server must still
answer a good request. The tritonclient tests skip when tritonclient is not installed.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
import bench_server
import make_samples
from aot.runtime.library import build_server
from bench_server import ServerProcess as Server

MODELS = ["lenet", "mlp"]  # the samples; "mixed" (below) has INT64, FP32 and BOOL tensors
MAX_BODY = 1 << 20
REQUEST_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def exe() -> Path:
    """The server built from runtime_c/ (cached), or the one AOT_SERVER_EXE names (say a
    sanitizer build: make -C runtime_c BUILD_DIR=build/asan SAN=-fsanitize=address,undefined server)."""
    given = os.environ.get("AOT_SERVER_EXE")
    return Path(given) if given else build_server()


def mixed_model() -> onnx.ModelProto:
    """Two inputs and three outputs of three datatypes: sum = float(ids) + x, twice = 2 * ids
    (INT64), positive = x > 0 (BOOL)."""
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["ids_f"], to=f32),
         helper.make_node("Add", ["ids_f", "x"], ["sum"]),
         helper.make_node("Mul", ["ids", "two"], ["twice"]),
         helper.make_node("Greater", ["x", "zero"], ["positive"])],
        "mixed",
        [helper.make_tensor_value_info("ids", i64, [2, 3]), helper.make_tensor_value_info("x", f32, [2, 3])],
        [helper.make_tensor_value_info("sum", f32, [2, 3]), helper.make_tensor_value_info("twice", i64, [2, 3]),
         helper.make_tensor_value_info("positive", TensorProto.BOOL, [2, 3])],
        [numpy_helper.from_array(np.array(2, np.int64), "two"),
         numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def halves_model() -> onnx.ModelProto:
    """FP16 and BF16 inputs: f = float(h), g = float(b), and h back as FP16."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["h"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["b"], ["g"], to=TensorProto.FLOAT),
         helper.make_node("Identity", ["h"], ["h_out"])],
        "halves",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT16, [8]),
         helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [8])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [8]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [8]),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT16, [8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("served")
    paths = make_samples.write_samples(out)
    paths["mixed"] = out / "mixed.onnx"
    onnx.save(mixed_model(), paths["mixed"])
    paths["halves"] = out / "halves.onnx"
    onnx.save(halves_model(), paths["halves"])
    compiled = {}
    for name in MODELS + ["mixed", "halves"]:
        compiled[name] = out / f"{name}.aot"
        aot.compile(paths[name], compiled[name])
    return compiled


@pytest.fixture(scope="module")
def server(exe, artifacts):
    srv = Server(exe, artifacts, "--workers", "2", "--queue", "64", "--max-body-bytes", str(MAX_BODY),
                 "--request-timeout", str(REQUEST_TIMEOUT_S), "--idle-timeout", "20")
    yield srv
    code = srv.stop()
    assert code == 0, "aot_server did not exit cleanly on SIGTERM:\n" + "".join(srv.log)


@pytest.fixture(scope="module")
def sessions(artifacts) -> dict[str, aot.Session]:
    return {name: aot.Session(path) for name, path in artifacts.items()}


@pytest.fixture(scope="module")
def httpclient():
    return pytest.importorskip("tritonclient.http")


# ---------------------------------------------------------------- raw HTTP


_pending: dict[int, bytes] = {}  # bytes read past a response, by socket fileno


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response (status, lower-cased headers, body) from `sock`; bytes of the
    next response read with it are kept for the next call (pipelining)."""
    data = _pending.pop(sock.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed after {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed in the body")
        rest += chunk
    if rest[length:]:
        _pending[sock.fileno()] = rest[length:]
    return status, headers, rest[:length]


def raw(server: Server, payload: bytes, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(payload)
        return read_response(sock)


def post(path: str, body: bytes, extra_headers: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra_headers}\r\n").encode() + body


def infer_json(x: np.ndarray, name: str = "x", datatype: str = "FP32", shape=None) -> bytes:
    return json.dumps({"inputs": [{"name": name, "datatype": datatype,
                                   "shape": list(x.shape) if shape is None else shape,
                                   "data": x.ravel().tolist()}]}).encode()


def lenet_input(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 1, 28, 28)).astype(np.float32)


def mlp_input(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 784)).astype(np.float32)


def assert_good_request_served(server: Server, sessions) -> None:
    x = lenet_input(7)
    status, _, body = raw(server, post("/v2/models/lenet/infer", infer_json(x)))
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    want = sessions["lenet"].run(None, {"x": x})[0]
    np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(out["shape"]), want,
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- tritonclient


def test_health_and_metadata(server, sessions, httpclient):
    client = httpclient.InferenceServerClient(server.url)
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "aot_server" and "binary_tensor_data" in meta["extensions"]
    for name in MODELS:
        session = sessions[name]
        assert client.is_model_ready(name)
        m = client.get_model_metadata(name)
        assert m["name"] == name and m["versions"] == ["1"]
        (i,), (o,) = session.get_inputs(), session.get_outputs()
        assert m["inputs"] == [{"name": i.name, "datatype": "FP32", "shape": list(i.shape)}]
        assert m["outputs"] == [{"name": o.name, "datatype": "FP32", "shape": list(o.shape)}]
        assert client.get_model_metadata(name, model_version="1")["name"] == name
    assert not client.is_model_ready("nope")
    with pytest.raises(httpclient.InferenceServerException, match="unknown model 'nope'"):
        client.get_model_metadata("nope")


def test_concurrent_clients_json_and_binary_match_session(server, sessions, httpclient):
    """8 threads x 25 requests, models and modes mixed; every answer equals Session.run."""
    threads, per_thread = 8, 25
    jobs = []
    for t in range(threads):
        for k in range(per_thread):
            seed = 1000 * t + k
            model = MODELS[(t + k) % 2]
            x = lenet_input(seed) if model == "lenet" else mlp_input(seed)
            want = sessions[model].run(None, {"x": x})[0]
            mode = ("binary", "json", "default")[(t * per_thread + k) % 3]
            jobs.append((t, model, x, want, mode, f"req-{seed}"))

    def run_thread(t: int) -> int:
        client = httpclient.InferenceServerClient(server.url, connection_timeout=30, network_timeout=30)
        done = 0
        for _, model, x, want, mode, rid in (j for j in jobs if j[0] == t):
            inp = httpclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=mode != "json")
            if mode == "default":  # no outputs named: binary_data_output on the request
                result = client.infer(model, [inp], request_id=rid)
            else:
                out = httpclient.InferRequestedOutput("y", binary_data=mode == "binary")
                result = client.infer(model, [inp], outputs=[out], request_id=rid)
            got = result.as_numpy("y")
            assert result.get_response()["id"] == rid
            assert result.get_response()["model_name"] == model
            assert got.dtype == np.float32 and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            if mode == "json":  # 9 significant digits: a float32 survives the text exactly
                assert "data" in result.get_output("y")
            done += 1
        client.close()
        return done

    start = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        counts = list(pool.map(run_thread, range(threads)))
    assert sum(counts) == threads * per_thread
    assert time.monotonic() - start < 120


MIXED_IDS = np.array([[1, -2, 3], [2**40, 0, -(2**62)]], np.int64)
MIXED_X = np.array([[0.5, -1.0, 2.25], [0.0, 3.0, -4.0]], np.float32)


def test_mixed_datatypes_with_tritonclient(server, sessions, httpclient):
    """INT64 and FP32 inputs; FP32, INT64 and BOOL outputs, requested out of order and in
    both modes at once."""
    client = httpclient.InferenceServerClient(server.url)
    meta = client.get_model_metadata("mixed")
    assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [("ids", "INT64"), ("x", "FP32")]
    assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [
        ("sum", "FP32"), ("twice", "INT64"), ("positive", "BOOL")]
    want = dict(zip(["sum", "twice", "positive"], sessions["mixed"].run(None, {"ids": MIXED_IDS, "x": MIXED_X})))
    for binary_in in (True, False):
        ids = httpclient.InferInput("ids", [2, 3], "INT64")
        ids.set_data_from_numpy(MIXED_IDS, binary_data=binary_in)
        x = httpclient.InferInput("x", [2, 3], "FP32")
        x.set_data_from_numpy(MIXED_X, binary_data=not binary_in)
        outputs = [httpclient.InferRequestedOutput("positive", binary_data=True),
                   httpclient.InferRequestedOutput("sum", binary_data=False),
                   httpclient.InferRequestedOutput("twice", binary_data=binary_in)]
        result = client.infer("mixed", [x, ids], outputs=outputs)  # inputs out of order too
        assert [o["name"] for o in result.get_response()["outputs"]] == ["positive", "sum", "twice"]
        for name, value in want.items():
            got = result.as_numpy(name)
            assert got.dtype == value.dtype and np.array_equal(got, value), name
    # only one output asked for: only it comes back
    only = client.infer("mixed", [ids, x], outputs=[httpclient.InferRequestedOutput("twice")])
    assert [o["name"] for o in only.get_response()["outputs"]] == ["twice"]


def test_mixed_datatypes_as_json(server, sessions):
    body = json.dumps({"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": [2, 3], "data": MIXED_IDS.tolist()},
        {"name": "x", "datatype": "FP32", "shape": [2, 3], "data": MIXED_X.ravel().tolist()}]}).encode()
    status, _, answer = raw(server, post("/v2/models/mixed/infer", body))
    assert status == 200, answer
    outs = {o["name"]: o for o in json.loads(answer)["outputs"]}
    assert outs["twice"]["data"] == (2 * MIXED_IDS).ravel().tolist()  # exact integers past 2**53
    assert outs["positive"]["data"] == (MIXED_X > 0).ravel().tolist()  # true/false
    assert outs["positive"]["datatype"] == "BOOL" and outs["twice"]["datatype"] == "INT64"


@pytest.mark.parametrize("ids, phrase", [
    ("[1.5,0,0,0,0,0]", "element 0 (1.5) is not a INT64 value (an integer in range)"),
    ("[0,9223372036854775808,0,0,0,0]", "element 1 (9223372036854775808) is not a INT64 value"),
    ("[0,0,true,0,0,0]", "element 2 (true) is not a INT64 value"),
    ("[0,0,0,null,0,0]", "element 3 is null, not a INT64 value"),
    ("[[0,0,0],[0,0,0],[0]]", "holds more than the 6 elements of its shape"),
    ("[0,0,0,0,0,{}]", "element 5 is an object, not a INT64 value"),
])
def test_integer_data_is_checked(server, ids, phrase):
    body = ('{"inputs":[{"name":"ids","datatype":"INT64","shape":[2,3],"data":%s},'
            '{"name":"x","datatype":"FP32","shape":[2,3],"data":[0,0,0,0,0,0]}]}' % ids).encode()
    status, _, answer = raw(server, post("/v2/models/mixed/infer", body))
    assert status == 400 and phrase in json.loads(answer)["error"], answer


def test_fp16_and_bf16_as_json(server):
    """JSON numbers rounded to FP16 and BF16 to nearest, ties to even, from the double (as
    numpy's float64 -> float16): normal, subnormal, tie, overflow to inf, NaN; FP16 out as JSON."""
    h = [1.0, -2.5, 65504.0, 65520.0, 6e-8, 1.0 + 2**-11, 0.1, float("nan")]
    b = [1.0, -2.5, 3.0e38, 3.4e38, 1e-40, 1.0 + 2**-8, 0.1, float("-inf")]
    body = json.dumps({"inputs": [{"name": "h", "datatype": "FP16", "shape": [8], "data": h},
                                  {"name": "b", "datatype": "BF16", "shape": [8], "data": b}]}).encode()
    status, _, answer = raw(server, post("/v2/models/halves/infer", body))
    assert status == 200, answer
    # 9 significant digits give a float32 back exactly: compare as float32
    outs = {o["name"]: np.array(o["data"], np.float64).astype(np.float32) for o in json.loads(answer)["outputs"]}
    with np.errstate(over="ignore"):  # 65520 overflows to inf, as it should
        want_h = np.array(h, np.float64).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(outs["f"], want_h)  # 65520 -> inf, 1 + 2**-11 -> 1 (even)
    np.testing.assert_array_equal(outs["h_out"], want_h)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    want_b = np.array(b, np.float64).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(outs["g"], want_b)
    assert outs["g"][3] == np.inf and outs["g"][5] == 1.0 and outs["g"][4] != 0


def test_nested_json_data_and_json_output(server, sessions):
    x = mlp_input(3)
    body = json.dumps({"id": "nested", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 784],
                                                   "data": x.tolist()}],
                       "outputs": [{"name": "y"}]}).encode()
    status, headers, answer = raw(server, post("/v2/models/mlp/infer", body))
    assert status == 200 and headers["content-type"] == "application/json"
    reply = json.loads(answer)
    assert reply["id"] == "nested" and reply["model_version"] == "1"
    (out,) = reply["outputs"]
    assert out["name"] == "y" and out["datatype"] == "FP32" and out["shape"] == [1, 10]
    want = sessions["mlp"].run(None, {"x": x})[0]
    assert np.array_equal(np.array(out["data"], np.float32).reshape(1, 10), want)


def test_binary_request_raw(server, sessions):
    """The binary tensor extension by hand: JSON header, then the raw bytes; binary answer."""
    x = lenet_input(5)
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    payload = post("/v2/models/lenet/versions/1/infer", header + x.tobytes(),
                   f"Inference-Header-Content-Length: {len(header)}\r\n")
    status, headers, answer = raw(server, payload)
    assert status == 200, answer
    n = int(headers["inference-header-content-length"])
    reply = json.loads(answer[:n])
    (out,) = reply["outputs"]
    assert out["parameters"]["binary_data_size"] == 40 and len(answer) == n + 40
    got = np.frombuffer(answer[n:], np.float32).reshape(1, 10)
    assert np.array_equal(got, sessions["lenet"].run(None, {"x": x})[0])


# ---------------------------------------------------------------- malformed requests

X = np.zeros((1, 1, 28, 28), np.float32)
GOOD_HEADER = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                      "parameters": {"binary_data_size": X.nbytes}}]}).encode()

BAD_REQUESTS = {
    # name: (raw request, expected status, a phrase of the error)
    "bad_json": (post("/v2/models/lenet/infer", b'{"inputs": [ {"name": "x",'), 400, "JSON error at byte"),
    "not_an_object": (post("/v2/models/lenet/infer", b"[1,2]"), 400, "not an object"),
    "wrong_shape": (post("/v2/models/lenet/infer", infer_json(np.zeros((1, 784), np.float32))), 400,
                    "shape [1,784], but the model takes [1,1,28,28]"),
    "wrong_datatype": (post("/v2/models/lenet/infer", infer_json(X, datatype="INT64")), 400,
                       "datatype INT64, but the model takes FP32"),
    "unknown_input": (post("/v2/models/lenet/infer", infer_json(X, name="image")), 400,
                      "has no input 'image' (its inputs: x)"),
    "too_few_elements": (post("/v2/models/lenet/infer",
                              infer_json(np.zeros(10, np.float32), shape=[1, 1, 28, 28])), 400,
                         "holds 10 elements, but its shape takes 784"),
    "string_element": (post("/v2/models/lenet/infer",
                            b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1,28,28],"data":["a"]}]}'),
                       400, "element 0 (a) is not a FP32 value"),
    "missing_input": (post("/v2/models/lenet/infer", b'{"inputs":[]}'), 400, "missing input 'x'"),
    "unknown_output": (post("/v2/models/lenet/infer",
                            infer_json(X)[:-1] + b',"outputs":[{"name":"z"}]}'), 400, "has no output 'z'"),
    "unknown_model": (post("/v2/models/resnet/infer", infer_json(X)), 404, "unknown model 'resnet'"),
    "unknown_version": (post("/v2/models/lenet/versions/3/infer", infer_json(X)), 404, "no version '3'"),
    "unknown_path": (b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no such endpoint"),
    "get_infer": (b"GET /v2/models/lenet/infer HTTP/1.1\r\nHost: x\r\n\r\n", 405, "use POST"),
    "post_live": (post("/v2/health/live", b"{}"), 405, "use GET"),
    "oversized_body": (b"POST /v2/models/lenet/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{"
                       % (MAX_BODY + 1), 413, "over this server's limit"),
    "chunked": (b"POST /v2/models/lenet/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2\r\n{}\r\n0\r\n\r\n", 411, "Content-Length"),
    "no_length": (b"POST /v2/models/lenet/infer HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Content-Length"),
    "gzip": (post("/v2/models/lenet/infer", b"\x1f\x8b", "Content-Encoding: gzip\r\n"), 415, "gzip"),
    "garbage": (b"\x00\xff\xfe garbage \x80\x81\r\n\r\n", 400, "malformed request line"),
    "bad_version": (b"GET /v2 HTTP/2.0\r\n\r\n", 505, "HTTP/1.1"),
    "bad_header": (b"GET /v2 HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed header"),
    "bad_content_length": (b"POST /v2/models/lenet/infer HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400,
                           "Content-Length is not a number"),
    "huge_header": (b"GET /v2 HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431, "exceed"),
    "truncated_binary": (post("/v2/models/lenet/infer", GOOD_HEADER + X.tobytes()[:1000],
                              f"Inference-Header-Content-Length: {len(GOOD_HEADER)}\r\n"), 400,
                         "binary data truncated: 3136 bytes expected, 1000 left"),
    "binary_header_past_body": (post("/v2/models/lenet/infer", GOOD_HEADER,
                                     "Inference-Header-Content-Length: 99999\r\n"), 400,
                                "more than the body's"),
    "binary_size_mismatch": (post("/v2/models/lenet/infer",
                                  GOOD_HEADER.replace(b"3136", b"3135") + X.tobytes()[:3135],
                                  f"Inference-Header-Content-Length: {len(GOOD_HEADER)}\r\n"), 400,
                             "binary_data_size 3135, but its shape and datatype take 3136 bytes"),
    "extra_binary": (post("/v2/models/lenet/infer", GOOD_HEADER + X.tobytes() + b"xx",
                          f"Inference-Header-Content-Length: {len(GOOD_HEADER)}\r\n"), 400,
                     "2 bytes of binary data after the last input's"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_malformed_request_gets_a_kserve_error_and_the_server_stays_up(server, sessions, case):
    payload, want_status, phrase = BAD_REQUESTS[case]
    status, headers, body = raw(server, payload)
    assert status == want_status, body
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert phrase in error, error
    if want_status == 405:
        assert headers["allow"] in ("GET", "POST")
    assert_good_request_served(server, sessions)


def test_oversized_body_sent_whole_still_reads_413(server, sessions):
    """The client sends all of a body past --max-body-bytes; the server answers 413 without
    reading it and closes gently, so the client reads the answer instead of a reset."""
    body = b"[" + b"0," * (MAX_BODY // 2) + b"0]"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(post("/v2/models/lenet/infer", body)[:200])
        status, headers, answer = read_response(sock)
        try:
            sock.sendall(body[200 - 100:])  # the rest arrives after the answer
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert status == 413 and headers["connection"] == "close"
    assert "over this server's limit" in json.loads(answer)["error"]
    assert_good_request_served(server, sessions)


def test_seeded_garbage_never_takes_the_server_down(server, sessions):
    rng = np.random.default_rng(0)
    good = post("/v2/models/lenet/infer", GOOD_HEADER + X.tobytes(),
                f"Inference-Header-Content-Length: {len(GOOD_HEADER)}\r\n")
    for k in range(60):
        if k % 2:
            payload = bytes(rng.integers(0, 256, int(rng.integers(1, 3000)), dtype=np.uint8))
        else:  # a valid request with bytes flipped: header and body damage
            payload = bytearray(good)
            for at in rng.integers(0, len(payload), int(rng.integers(1, 8))):
                payload[at] = int(rng.integers(0, 256))
            payload = bytes(payload)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # no more is coming: the server answers or closes
            sock.settimeout(REQUEST_TIMEOUT_S + 5)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    assert server.proc.poll() is None
    assert_good_request_served(server, sessions)


def test_mutated_request_bodies_on_one_connection(server, sessions):
    """400 mutated JSON and binary inference requests on one keep-alive connection: each is
    answered (200, or an error as JSON), and the connection stays usable unless the answer
    closes it."""
    rng = np.random.default_rng(1)
    x = mlp_input(9)
    bodies = [
        json.dumps({"id": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 784], "data": x.tolist()}],
                    "outputs": [{"name": "y", "parameters": {"binary_data": False}}]}).encode(),
        json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 784],
                                "data": x.ravel().tolist()}], "parameters": {"binary_data_output": True}}).encode(),
    ]
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 784],
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    special = [ord(c) for c in '[]{},:"\\e-.1 '] + [0, 0x80, 0xFF]
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    statuses = set()
    try:
        for k in range(400):
            if k % 3 < 2:
                body = bytearray(bodies[k % 3])
                for at in rng.integers(0, len(body), int(rng.integers(1, 6))):
                    body[at] = int(rng.choice(special))
                if rng.random() < 0.2:
                    body = body[: int(rng.integers(0, len(body)))]
                request = post("/v2/models/mlp/infer", bytes(body))
            else:
                head = bytearray(header)
                for at in rng.integers(0, len(head), int(rng.integers(1, 4))):
                    head[at] = int(rng.integers(32, 127))
                data = x.tobytes()[: int(rng.integers(0, x.nbytes + 8))]
                request = post("/v2/models/mlp/infer", bytes(head) + data,
                               f"Inference-Header-Content-Length: {int(rng.integers(0, len(head) + 5))}\r\n")
            sock.sendall(request)
            status, headers, answer = read_response(sock)
            statuses.add(status)
            if status != 200:
                assert isinstance(json.loads(answer)["error"], str)
            if headers["connection"] == "close":
                sock.close()
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    finally:
        sock.close()
    assert statuses <= {200, 400} and 400 in statuses
    assert_good_request_served(server, sessions)


def test_keep_alive_and_pipelined_requests(server, sessions):
    x = lenet_input(11)
    one = post("/v2/models/lenet/infer", infer_json(x))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(one + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n" + one)
        answers = [read_response(sock) for _ in range(3)]
        assert [a[0] for a in answers] == [200, 200, 200]
        assert answers[0][1]["connection"] == "keep-alive"
        assert answers[0][2] == answers[2][2]
        sock.sendall(b"GET /v2 HTTP/1.1\r\nConnection: close\r\n\r\n")
        status, headers, _ = read_response(sock)
        assert status == 200 and headers["connection"] == "close"
        assert sock.recv(10) == b""


def test_slow_client_does_not_block_others_and_times_out(server, sessions, httpclient):
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=REQUEST_TIMEOUT_S + 5)
    try:
        body = infer_json(lenet_input(1))
        slow.sendall(post("/v2/models/lenet/infer", body)[: 60 + len(body) // 2])  # half, then stall
        started = time.monotonic()
        client = httpclient.InferenceServerClient(server.url)
        x = lenet_input(2)
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        got = client.infer("lenet", [inp]).as_numpy("y")
        assert time.monotonic() - started < REQUEST_TIMEOUT_S / 2, "the stalled client held others up"
        np.testing.assert_allclose(got, sessions["lenet"].run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
        status, headers, err = read_response(slow)  # the stalled request times out
        assert status == 408 and "not received within" in json.loads(err)["error"]
        assert time.monotonic() - started < REQUEST_TIMEOUT_S + 3
        assert slow.recv(10) == b""
    finally:
        slow.close()


# ---------------------------------------------------------------- limits and shutdown


def test_connection_limit_and_sigterm_with_idle_connection(exe, artifacts, sessions):
    srv = Server(exe, {"lenet": artifacts["lenet"]}, "--workers", "1", "--queue", "1",
                 "--max-connections", "1", "--idle-timeout", "30")
    try:
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        # the one connection is taken by `idle`: the next is refused with 503 at once
        time.sleep(0.2)
        status, _, body = raw(srv, b"GET /v2/health/live HTTP/1.1\r\n\r\n")
        assert status == 503 and "--max-connections" in json.loads(body)["error"]
        idle.sendall(b"GET /v2/health/live HTTP/1.1\r\n\r\n")
        assert read_response(idle)[0] == 200
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)  # the idle keep-alive connection must not hold it
        assert srv.proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert idle.recv(10) == b""
        idle.close()
    finally:
        srv.stop()
    assert any("stopped" in line for line in srv.log)


def test_sigint_lets_a_request_in_flight_finish(exe, artifacts, sessions):
    """A request half-sent when SIGINT comes is still read, run and answered (Connection:
    close), then the server exits 0; new connections are no longer accepted."""
    srv = Server(exe, {"lenet": artifacts["lenet"]}, "--request-timeout", "10")
    try:
        x = lenet_input(4)
        request = post("/v2/models/lenet/infer", infer_json(x))
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.sendall(request[:20])  # in the request line: a request begun is one to finish
        time.sleep(0.2)
        srv.proc.send_signal(signal.SIGINT)
        refused = False
        for _ in range(50):  # the listening socket closes
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
            except OSError:
                refused = True
                break
            time.sleep(0.1)
        assert refused
        sock.sendall(request[20:])
        status, headers, body = read_response(sock)
        assert status == 200 and headers["connection"] == "close"
        (out,) = json.loads(body)["outputs"]
        want = sessions["lenet"].run(None, {"x": x})[0]
        np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(1, 10), want, rtol=1e-5, atol=1e-6)
        sock.close()
        assert srv.proc.wait(timeout=10) == 0
    finally:
        srv.stop()


def test_full_queue_answers_503_never_waits_unbounded(exe, artifacts):
    """One worker, a queue of one, 12 clients at once: each answer is 200 or a 503 JSON error."""
    srv = Server(exe, {"mlp": artifacts["mlp"]}, "--workers", "1", "--queue", "1")
    try:
        body = infer_json(mlp_input(0))
        request = post("/v2/models/mlp/infer", body)
        barrier = threading.Barrier(12)

        def one(_):
            barrier.wait()
            return raw(srv, request)

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(one, range(12)))
        statuses = sorted(a[0] for a in answers)
        assert set(statuses) <= {200, 503} and 200 in statuses
        for status, _, answer in answers:
            if status == 503:
                assert "queue" in json.loads(answer)["error"]
        assert srv.stop() == 0
    finally:
        srv.stop()


def test_model_config_for_triton_tools(server, httpclient):
    config = httpclient.InferenceServerClient(server.url).get_model_config("lenet")
    assert config["max_batch_size"] == 0
    assert config["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [1, 1, 28, 28]}]
    assert config["output"] == [{"name": "y", "data_type": "TYPE_FP32", "dims": [1, 10]}]


def test_bodies_held_at_once_are_bounded(exe, artifacts):
    """--max-buffered-bytes: a stalled client holding 2000 body bytes leaves 1000 of 3000
    for the rest, so a 2000-byte body gets 503 before it is read; a small one still runs."""
    srv = Server(exe, {"lenet": artifacts["lenet"]}, "--max-buffered-bytes", "3000")
    try:
        for _ in range(3):  # bodies given back once answered, on closed and kept connections
            status, _, _ = raw(srv, post("/v2/models/lenet/infer", b"{}" + b" " * 900, "Connection: close\r\n"))
            assert status == 400
            status, _, _ = raw(srv, post("/v2/models/lenet/infer", b"{}" + b" " * 900))
            assert status == 400
        stalled = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        stalled.sendall(b"POST /v2/models/lenet/infer HTTP/1.1\r\nContent-Length: 2000\r\n\r\n{")
        for _ in range(50):  # until the server has read the stalled head (at once, but on a busy machine)
            status, _, body = raw(srv, post("/v2/models/lenet/infer", b"{}" + b" " * 1998))
            if status != 400:
                break
            time.sleep(0.1)
        assert status == 503 and "--max-buffered-bytes" in json.loads(body)["error"]
        status, _, body = raw(srv, post("/v2/models/lenet/infer", b"{}"))
        assert status == 400 and "\"inputs\" must be an array" in json.loads(body)["error"]
        stalled.close()
        assert srv.stop() == 0
    finally:
        srv.stop()


def test_bad_command_lines_are_refused(exe, artifacts, tmp_path):
    cases = [
        ([], "no model"),
        (["--model", "lenet"], "NAME=PATH"),
        (["--model", "a b=x.aot"], "may hold only"),
        (["--model", f"m={tmp_path / 'missing.aot'}"], "cannot open"),
        (["--model", f"m={artifacts['lenet']}", "--workers", "0"], "bad value '0' for --workers"),
        (["--model", f"m={artifacts['lenet']}", "--frobnicate", "1"], "unknown option"),
    ]
    for args, phrase in cases:
        proc = subprocess.run([str(exe), "--port", "0", *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0 and phrase in proc.stderr, (args, proc.stderr)


def test_benchmark_runs(exe, capsys):
    pytest.importorskip("tritonclient.http")
    results = bench_server.main(["--requests", "40", "--threads", "2", "--workers", "1", "--server", str(exe)])
    assert [r["mode"] for r in results] == ["binary", "json"]
    assert all(r["errors"] == 0 and r["rps"] > 0 and r["p99_ms"] >= r["p50_ms"] for r in results)
    out = capsys.readouterr().out
    assert "rps" in out and "p99 ms" in out and "CPU:" in out
