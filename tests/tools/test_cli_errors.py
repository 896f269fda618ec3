"""The CLI used carelessly (issue 11): every error is one `error:` line and no traceback; exit
status 1 when a model, artifact or input file is bad, 2 when the command line is wrong; the
model is never overwritten and a failed compile never damages an earlier artifact."""
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, save

from aot.cli import EXIT_FAILED, EXIT_USAGE, compile_main, main


def _relu(path, dims=(2, 3)):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture
def model(tmp_path):
    return _relu(tmp_path / "m.onnx")


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifact")
    path = out / "m.aot"
    result = CliRunner().invoke(compile_main, [str(_relu(out / "m.onnx")), "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


def _invoke(command, args, status):
    """Run a command, check its exit status and that it failed with `error:`, no traceback."""
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert result.exit_code == status, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "error: " in result.stderr and "Traceback" not in result.output
    assert not any(line.startswith("Error:") for line in result.output.splitlines())  # click's own style
    return result.stderr


def test_output_that_is_the_model_is_refused_through_any_path(model, tmp_path):
    original = model.read_bytes()
    (tmp_path / "dir").mkdir()
    (tmp_path / "link.onnx").symlink_to(model)
    os.link(model, tmp_path / "hard.onnx")
    for output in [model, tmp_path / "dir" / ".." / "m.onnx", tmp_path / "link.onnx", tmp_path / "hard.onnx"]:
        err = _invoke(compile_main, [model, "-o", output], EXIT_USAGE)
        assert f"the output '{output}' is the model file '{model}' itself" in err and "m.aot" in err
    err = _invoke(main, ["compile", tmp_path / "link.onnx", "-o", model], EXIT_USAGE)  # the model through a link
    assert "is the model file" in err
    assert model.read_bytes() == original


def test_output_in_a_missing_or_unusable_directory_is_refused_before_the_compile(model, tmp_path):
    err = _invoke(compile_main, [model, "-o", "/nonexistent_dir/x.aot"], EXIT_USAGE)
    assert err == "error: cannot write '/nonexistent_dir/x.aot': the directory '/nonexistent_dir' does not exist\n"
    (tmp_path / "file").write_text("")
    err = _invoke(compile_main, [model, "-o", tmp_path / "file" / "x.aot"], EXIT_USAGE)
    assert "is not a directory" in err
    err = _invoke(compile_main, [model, "--dump-ir", tmp_path / "file" / "ir"], EXIT_USAGE)
    assert "cannot create the IR dump directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "m.onnx"]  # no artifact, no temp file


def test_a_failed_compile_keeps_the_earlier_artifact(model, tmp_path):
    out = tmp_path / "m.aot"
    result = CliRunner().invoke(compile_main, [str(model), "-o", str(out)])
    assert result.exit_code == 0, result.output
    good = out.read_bytes()
    dynamic = _relu(tmp_path / "dynamic.onnx", ("batch", 3))
    err = _invoke(compile_main, [dynamic, "-o", out], EXIT_FAILED)
    assert "fix it with --shape x=1x3" in err  # the CLI's spelling of the fix
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dynamic.onnx", "m.aot", "m.onnx"]


def test_a_failed_write_is_an_error_and_keeps_the_earlier_artifact(model, tmp_path, monkeypatch):
    out = tmp_path / "m.aot"
    out.write_bytes(b"earlier artifact")

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    err = _invoke(compile_main, [model, "-o", out], EXIT_FAILED)
    assert err == f"error: cannot write '{out}': No space left on device\n"
    assert out.read_bytes() == b"earlier artifact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.aot", "m.onnx"]


@pytest.mark.parametrize("cpu, message", [
    ("pentium9", "error: unknown CPU 'pentium9' for x86_64; use 'native' for this machine, or one of"),
    ("pentium4", "error: CPU 'pentium4' cannot run 64-bit code"),
    ("i686", "error: CPU 'i686' cannot run 64-bit code"),
])
def test_unknown_or_32bit_cpu_is_a_usage_error_without_llvm_output(model, tmp_path, cpu, message):
    """In a child process: LLVM writes its warnings to file descriptor 2 and used to abort the process."""
    out = tmp_path / "m.aot"
    proc = subprocess.run([sys.executable, "-c", "from aot.cli import compile_main; compile_main()",
                           str(model), "-o", str(out), "--cpu", cpu], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1
    assert "znver4" in proc.stderr and "recognized" not in proc.stderr and "LLVM ERROR" not in proc.stderr
    assert proc.stdout == "" and not out.exists()


def test_usage_errors_of_every_command_exit_2_with_the_usage_line(model, artifact, tmp_path):
    cases = [
        (compile_main, [model, "--bogus"], "No such option '--bogus'"),
        (compile_main, [model, "--shape", "x=1xfoo"], "'x=1xfoo' is not NAME=DIMS"),
        (compile_main, [], "Missing argument 'MODEL'"),
        (main, ["compile", model, "--explain", "nothing"], "Invalid value for '--explain'"),
        (main, ["run", artifact, "--threads", "0"], "0 is not in the range x>=1"),
        (main, ["run", artifact, "--input", "x"], "'x' is not NAME=FILE.npy"),
        (main, ["verify", model, "--atol", "abc"], "'abc' is not a valid float"),
        (main, ["verify", model, "--threads", "0"], "0 is not in the range x>=1"),
        (main, ["inspect", artifact, "--bogus"], "No such option '--bogus'"),
        (main, ["nosuch"], "No such command 'nosuch'"),
    ]
    for command, args, message in cases:
        err = _invoke(command, args, EXIT_USAGE)
        assert err.startswith("Usage: ") and message in err, (args, err)


def test_wrong_arguments_found_by_aot_exit_2(model, artifact, tmp_path):
    (tmp_path / "file").write_text("")
    cases = [
        (main, ["compile", model, "-o", tmp_path / "none" / "m.aot"], "the directory"),
        (main, ["compile", model, "--cpu", "znver9"], "unknown CPU 'znver9' for x86_64 (did you mean znver5"),
        (main, ["compile", model, "--target", "gpu"], "target 'gpu' is not supported"),
        (main, ["compile", model, "--cpu", "x86-64-v4,,x86-64-v3"], "has an empty item"),
        (main, ["compile", model, "--cpu", "x86-64-v3,x86-64-v3"], "names 'x86-64-v3' twice"),
        (main, ["verify", model, "--cpu", "pentium4"], "CPU 'pentium4' cannot run 64-bit code"),
        (main, ["run", artifact, "--output-dir", tmp_path / "file" / "out"], "--output-dir: cannot create the directory"),
        (main, ["inspect", artifact, "--extract", tmp_path / "file" / "x"], "--extract: cannot create the directory"),
        (main, ["inspect", artifact, "--graph", tmp_path / "none" / "g.svg"], "does not exist"),
        (main, ["inspect", artifact, "--memory-plan", artifact], "is the artifact file"),
    ]
    for command, args, message in cases:
        err = _invoke(command, args, EXIT_USAGE)
        assert err.startswith("error: ") and message in err, (args, err)


def test_bad_files_exit_1(model, artifact, tmp_path):
    damaged = tmp_path / "bad.aot"
    damaged.write_bytes(artifact.read_bytes()[:100])
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    (tmp_path / "text.npy").write_text("not an array")
    cases = [
        (compile_main, [tmp_path / "none.onnx"], "cannot read model"),
        (main, ["compile", tmp_path / "bad.onnx"], "error: "),
        (main, ["run", damaged], "error: "),
        (main, ["run", tmp_path / "none.aot"], "error: "),
        (main, ["run", artifact, "--input", f"x={tmp_path / 'none.npy'}"], "--input x: cannot load"),
        (main, ["run", artifact, "--input", f"x={tmp_path / 'text.npy'}"], "is not a .npy array file"),
        (main, ["verify", tmp_path / "none.onnx"], "cannot read model"),
        (main, ["verify", model, "--artifact", damaged], "error: "),
        (main, ["inspect", damaged], "error: "),
    ]
    for command, args, message in cases:
        err = _invoke(command, args, EXIT_FAILED)
        assert message in err, (args, err)


def test_help_and_version_exit_0():
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0
    assert CliRunner().invoke(compile_main, ["--help"]).exit_code == 0
    bare = CliRunner().invoke(main, [])
    assert "Commands:" in bare.output and "error" not in bare.output
