"""Command line: `aot-compile MODEL -o OUT` and `aot compile|run|verify|inspect|bench|check|diff`.

Every error prints one `error: ...` line on stderr (a usage error also the usage
line first) and exits with a status that says whose mistake it was:
EXIT_FAILED when a model, artifact or input file is bad or the work failed,
EXIT_USAGE when the command line is wrong; no traceback either way.
"""
from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from aot import progress
from aot.errors import AotError, ArgumentError

EXIT_FAILED = 1  # a model, artifact or input file is bad, or the compile/run failed; `aot verify`: a mismatch
EXIT_USAGE = 2  # an unknown option, a malformed value, an unknown --cpu, an output that cannot be written
CACHE_OFF_ENV = "AOT_NO_CACHE"  # read by aot/codegen/cpu/cache.py


def parse_shape_option(values: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """`--shape x=1x3x224x224` (repeatable) -> {"x": (1, 3, 224, 224)}; `--shape x=` is a scalar."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in values:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split("x")) if dims else ()
            if any(d < 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise click.BadParameter(f"'{item}' is not NAME=DIMS like x=1x3x224x224", param_hint="--shape") from None
    return shapes


def _fail(err: AotError) -> NoReturn:
    click.echo(f"error: {err.cli_message}", err=True)
    sys.exit(EXIT_USAGE if isinstance(err, ArgumentError) else EXIT_FAILED)


def _show_click_error(err: click.ClickException) -> None:
    """Click's own errors (an unknown option, a bad value) as click shows them, with this CLI's `error:`."""
    if type(err).show not in (click.ClickException.show, click.UsageError.show):
        err.show()  # one that is no error message: `aot` alone prints the help
        return
    ctx = getattr(err, "ctx", None)
    if isinstance(err, click.UsageError) and ctx is not None:
        hint = ""
        if ctx.command.get_help_option(ctx) is not None:
            hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.\n"
        click.echo(f"{ctx.get_usage()}\n{hint}", err=True, color=ctx.color)
    click.echo(f"error: {err.format_message()}", err=True)


class _OwnErrors:
    """A click command whose entry point reports click's errors as `_show_click_error` does.

    Only the top command's `main` runs: the group's subcommands inherit its handling."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        run = super().main  # type: ignore[misc]
        if not standalone_mode:
            return run(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        try:
            status = run(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except click.ClickException as err:
            _show_click_error(err)
            sys.exit(EXIT_USAGE if isinstance(err, click.UsageError) else EXIT_FAILED)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(EXIT_FAILED)
        sys.exit(status if isinstance(status, int) else 0)  # an int: --help or --version's exit status


class Command(_OwnErrors, click.Command):
    pass


class Group(_OwnErrors, click.Group):
    pass


# buffer donation, for compile and for verify's compile (aot/donations.py)
DONATION_OPTIONS = [
    click.option("--donate", "donate", multiple=True,
                 help="let OUTPUT take over INPUT's buffer (a KV cache updated in place): INPUT=OUTPUT (repeatable)"),
    click.option("--no-infer-donation", "no_infer_donation", is_flag=True,
                 help="donate only what --donate names (by default names such as past_keys -> present_keys, "
                      "past_key_values.N.key -> present.N.key imply pairs)"),
]


def parse_donate_option(values: tuple[str, ...], known: Sequence[str] = ()) -> dict[str, str]:
    """`--donate past_keys=present_keys` (repeatable) -> {"past_keys": "present_keys"}; an input
    named twice is a usage error."""
    pairs: dict[str, str] = {}
    for item in values:
        split = split_name_value(item, known)
        if split is None or not split[1]:
            raise click.BadParameter(f"'{item}' is not INPUT=OUTPUT like past_keys=present_keys", param_hint="--donate")
        name, output = split
        if name in pairs:
            raise click.BadParameter(f"input '{name}' is donated twice ({pairs[name]}, {output})", param_hint="--donate")
        pairs[name] = output
    return pairs


compile_options = [
    click.argument("model", type=click.Path(dir_okay=False, path_type=Path)),
    click.option("-o", "--output", type=click.Path(path_type=Path),
                 help="artifact path (default: MODEL with .aot); with --emit c, a directory (default: MODEL's)"),
    click.option("--emit", type=click.Choice(["artifact", "c"]), default="artifact", show_default=True,
                 help="artifact: one .aot file for the runtime; c: a static object, archive and C header "
                      "(NAME.o, libNAME.a, NAME.h, NAME.json) to link without the runtime"),
    click.option("--name", default=None,
                 help="with --emit c: the C prefix of the header's names (default: MODEL's file name as an identifier)"),
    click.option("--shape", "shape", multiple=True, help="fix an input's shape: NAME=1x3x224x224 (repeatable)"),
    click.option("--bind", "bind", multiple=True, help="fix an input to a constant: NAME=FILE.npy (repeatable, ONNX)"),
    click.option("--target", default="cpu", show_default=True,
                 help="code to generate: cpu, cuda (PTX, and cubin where ptxas is installed) or cpu,cuda"),
    click.option("--cpu", default=None,
                 help="CPU(s) to generate code for: portable (default: x86-64-v4 and x86-64-v3 in one artifact; "
                      "the runtime picks the best the CPU supports), native, a CPU name, or a comma list"),
    click.option("--sm", default=None, help="GPU architectures for cuda code, comma-separated  [default: sm_80,sm_90]"),
    click.option("--gpu-matmul-precision", "gpu_matmul_precision", default=None,
                 help="f32 matrix multiplies in cuda code: fp32, or tf32 (tensor cores, inputs rounded to "
                      "10 mantissa bits: changes results)  [default: fp32]"),
    click.option("--weights-codec", "weights_codec", type=click.Choice(["zstd", "none"]), default="zstd",
                 show_default=True,
                 help="none: weights stored uncompressed and aligned, read in place from the mapped file "
                      "(near-instant open, pages shared between processes; a larger file)"),
    *DONATION_OPTIONS,
    click.option("--dump-ir", type=click.Path(file_okay=False, path_type=Path), help="write the IR after every pass to DIR"),
    click.option("--explain", type=click.Choice(["fusion"]), help="print why ops were (not) fused"),
    click.option("-v", "--verbose", is_flag=True, help="print time per pass"),
    click.option("--no-cache", "no_cache", is_flag=True,
                 help="compile every kernel afresh: neither read nor write the kernel cache "
                      "(~/.cache/aot, or $AOT_CACHE_DIR; AOT_NO_CACHE=1 does the same)"),
]


def _with_compile_options(fn: Any) -> Any:
    for option in reversed(compile_options):
        fn = option(fn)
    return fn


def _compile(model: Path, output: Path | None, shape: tuple[str, ...], bind: tuple[str, ...], target: str,
             cpu: str | None, sm: str | None, gpu_matmul_precision: str | None, donate: tuple[str, ...],
             no_infer_donation: bool, dump_ir: Path | None, explain: str | None, verbose: bool,
             no_cache: bool = False, emit: str = "artifact", name: str | None = None,
             weights_codec: str = "zstd") -> None:
    if emit == "c":
        if weights_codec != "zstd":
            _fail(ArgumentError(f"--weights-codec {weights_codec} does not go with --emit c: the object holds "
                                f"its weights as they are"))
        _emit_c(model, output, name, shape, bind, target, cpu, sm, gpu_matmul_precision, donate, no_infer_donation,
                dump_ir, explain, verbose, no_cache)
        return
    if name is not None:
        _fail(ArgumentError(f"--name {name} names the C prefix of --emit c; an artifact keeps the model's name"))
    from aot.driver import check_target, compile_model
    from aot.gpu_options import MATMUL_PRECISIONS
    from aot.planning.fusion import explain as explain_fusion

    # said in the options' spelling, before any work
    try:
        wants_cpu, wants_gpu = check_target(target)
        if sm is not None and not wants_gpu:
            raise ArgumentError(f"--sm {sm} needs GPU code: add cuda to --target (--target cuda or cpu,cuda)")
        if cpu is not None and not wants_cpu:
            raise ArgumentError(f"--cpu {cpu} needs CPU code: add cpu to --target (--target cpu or cpu,cuda)")
        if gpu_matmul_precision is not None:
            if gpu_matmul_precision not in MATMUL_PRECISIONS:
                raise ArgumentError(f"--gpu-matmul-precision {gpu_matmul_precision}: choose one of "
                                    f"{', '.join(MATMUL_PRECISIONS)}")
            if not wants_gpu:
                raise ArgumentError(f"--gpu-matmul-precision {gpu_matmul_precision} needs GPU code: add cuda to "
                                    f"--target (--target cuda or cpu,cuda)")
    except ArgumentError as err:
        _fail(err)
    shapes = parse_shape_option(shape)
    donations = parse_donate_option(donate, _model_input_names(model) if donate else ())
    output = output or model.with_suffix(".aot")
    # the bar on a terminal; -v prints its lines instead, and a pipe or a file gets neither
    reporter = progress.Reporter() if verbose else progress.for_stream(sys.stderr)
    log = (lambda line: click.echo(line, err=True)) if verbose else _phase_log(reporter)
    try:
        with progress.reporting(reporter), _cache_off(no_cache):
            reporter.phase("import")
            result = compile_model(model, output, shapes=shapes, bind=_load_arrays(bind, "--bind"), target=target,
                                   cpu=cpu, sm=sm, gpu_matmul_precision=gpu_matmul_precision or "fp32",
                                   weights_codec=weights_codec, donate=donations, infer_donation=not no_infer_donation, dump_ir=dump_ir, log=log)
    except AotError as err:
        _fail(err)
    if explain == "fusion":
        if wants_gpu:
            # one plan serves every target: the GPU kernels are these same kernels
            click.echo(f"target {target}: the GPU runs these same kernels (one plan for every target)")
        click.echo(explain_fusion(result.plan.kernels))
    m = result.manifest
    code = [c["arch"] for c in m["cpu"]] + [s["sm"] for s in m.get("cuda", {}).get("sms", [])]
    click.echo(f"wrote {output}: {result.size} bytes, {len(m['kernels'])} kernels ({', '.join(code)}), "
               f"arena {m['arena']['bytes']} B, weights {m['weights']['bytes']} B")


def _emit_c(model: Path, output: Path | None, name: str | None, shape: tuple[str, ...], bind: tuple[str, ...],
            target: str, cpu: str | None, sm: str | None, gpu_matmul_precision: str | None, donate: tuple[str, ...],
            no_infer_donation: bool, dump_ir: Path | None, explain: str | None, verbose: bool, no_cache: bool) -> None:
    """--emit c (aot/emit_c.py): what needs the runtime or an artifact is refused before any work."""
    from aot.emit_c import emit_c

    refused = [(target != "cpu", f"--target {target}", "the static object holds CPU code only"),
               (sm is not None, f"--sm {sm}", "the static object holds CPU code only"),
               (gpu_matmul_precision is not None, f"--gpu-matmul-precision {gpu_matmul_precision}",
                "the static object holds CPU code only"),
               (dump_ir is not None, "--dump-ir", "compile an artifact to see the IR"),
               (explain is not None, f"--explain {explain}", "compile an artifact to see the fusion")]
    for given, option, why in refused:
        if given:
            _fail(ArgumentError(f"{option} does not go with --emit c: {why}"))
    shapes = parse_shape_option(shape)
    donations = parse_donate_option(donate, _model_input_names(model) if donate else ())
    out_dir = output if output is not None else (model.parent if str(model.parent) else Path("."))
    log = (lambda line: click.echo(line, err=True)) if verbose else None
    try:
        with _cache_off(no_cache):
            result = emit_c(model, out_dir, name=name, shapes=shapes, bind=_load_arrays(bind, "--bind"), cpu=cpu,
                            donate=donations, infer_donation=not no_infer_donation, log=log)
    except AotError as err:
        _fail(err)
    written = ", ".join(str(path) for path in result.files.values())
    click.echo(f"wrote {written}: {result.kernels} kernels for {result.cpu}, arena {result.arena_bytes} B, "
               f"weights {result.weights_bytes} B; entries {result.prefix}_run, {result.prefix}_run_threads")


@contextmanager
def _cache_off(off: bool) -> Iterator[None]:
    """--no-cache: AOT_NO_CACHE=1 for this compile only (the CLI may run inside a longer process)."""
    before = os.environ.get(CACHE_OFF_ENV)
    if off:
        os.environ[CACHE_OFF_ENV] = "1"
    try:
        yield
    finally:
        if off and before is None:
            del os.environ[CACHE_OFF_ENV]
        elif off:
            os.environ[CACHE_OFF_ENV] = before


def _phase_log(reporter: progress.Reporter) -> Callable[[str], None] | None:
    """For the bar only: the compile's log lines say when import is over and the passes begin
    (codegen reports its own phase and kernels). None where nothing is shown."""
    if type(reporter) is progress.Reporter:
        return None

    def log(line: str) -> None:
        if line.startswith("import "):
            reporter.phase("passes")
    return log


@click.command(name="aot-compile", cls=Command)
@_with_compile_options
def compile_main(**kwargs: Any) -> None:
    """Compile MODEL (ONNX) into one self-contained .aot artifact (--emit c: a static object and a C header)."""
    _compile(**kwargs)


@click.group(cls=Group)
@click.version_option(package_name="aot-compiler")
def main() -> None:
    """aot: ahead-of-time compiler for ML models, and the tools around its artifacts."""


@main.command(name="compile")
@_with_compile_options
def compile_command(**kwargs: Any) -> None:
    """Compile MODEL (ONNX) into one self-contained .aot artifact (--emit c: a static object and a C header)."""
    _compile(**kwargs)


def split_name_value(item: str, known: Sequence[str] = ()) -> tuple[str, str] | None:
    """NAME=VALUE -> (NAME, VALUE), or None without a NAME.

    Names are the model's own and may hold '=' themselves: the split is after
    the longest of `known` that begins the item, else at the first '='.
    """
    for name in sorted(known, key=len, reverse=True):
        if item.startswith(f"{name}="):
            return name, item[len(name) + 1:]
    name, sep, value = item.partition("=")
    if not sep or not name:
        return None
    return name, value


def _load_arrays(items: tuple[str, ...], option: str, known: Sequence[str] = ()) -> dict[str, Any]:
    """NAME=FILE.npy items -> {NAME: array}; `known` are the model's input names, where known.
    A malformed item is a usage error, a file that cannot be loaded an AotError (a bad input)."""
    import numpy as np

    arrays = {}
    for item in items:
        split = split_name_value(item, known)
        if split is None:
            raise click.BadParameter(f"'{item}' is not NAME=FILE.npy", param_hint=option)
        name, path = split
        try:
            arrays[name] = np.load(path, allow_pickle=False)
        except OSError as err:
            raise AotError(f"{option} {name}: cannot load '{path}': {err.strerror or err}") from None
        except ValueError as err:
            raise AotError(f"{option} {name}: '{path}' is not a .npy array file: {err}") from None
    return arrays


def _make_dir(path: Path, option: str) -> None:
    """Create an output directory before the work: one that cannot be made is a usage error."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _fail(ArgumentError(f"{option}: cannot create the directory '{path}': {err.strerror or err}"))


def _check_device(value: str) -> str:
    """--device: cpu, cuda or cuda:N; anything else is a usage error before any work."""
    if value == "cpu" or re.fullmatch(r"cuda(:\d{1,9})?", value):
        return value
    raise click.BadParameter(f"{value!r} is not a device: use cpu, cuda or cuda:N (N the GPU's number)")


@main.command()
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--input", "inputs", multiple=True, help="NAME=FILE.npy (repeatable); missing inputs are seeded random")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), help="write each output as NAME.npy ('/' in a name written %2F)")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="worker threads")
@click.option("--seed", type=int, default=0, show_default=True, help="seed for random inputs")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="runs to time; prints the median")
@click.option("--device", default="cpu", show_default=True, callback=lambda ctx, param, value: _check_device(value),
              help="cpu, or cuda / cuda:N to run the artifact's GPU code on that GPU (inputs copied in, outputs out)")
def run(artifact: Path, inputs: tuple[str, ...], output_dir: Path | None, threads: int, seed: int, repeat: int,
        device: str) -> None:
    """Run ARTIFACT through the C runtime and print its outputs."""
    import numpy as np

    from aot.inspect import display_name
    from aot.runtime.session import Session

    if output_dir is not None:
        _make_dir(output_dir, "--output-dir")
    try:
        session = Session(artifact, threads=threads, device=device)
        feeds = _load_arrays(inputs, "--input", [info.name for info in session.get_inputs()])
        rng = np.random.default_rng(seed)
        for info in session.get_inputs():
            if info.name not in feeds:
                feeds[info.name] = _random_input(rng, info.shape, info.dtype)
        timings = []
        for _ in range(repeat):
            start = time.perf_counter()
            outputs = session.run(None, feeds)
            timings.append((time.perf_counter() - start) * 1000)
    except AotError as err:
        _fail(err)
    for info, value in zip(session.get_outputs(), outputs):
        flat = value.reshape(-1)[:8]
        click.echo(f"{display_name(info.name)}: {value.dtype}{list(value.shape)} {np.array2string(flat, precision=5, separator=', ')}"
                   f"{' ...' if value.size > 8 else ''}")
        if output_dir is not None:
            _save_output(output_dir, info.name, value)
    size = artifact.stat().st_size
    if repeat == 1:
        click.echo(f"artifact {size} bytes; ran in {timings[0]:.3f} ms")
    else:
        where = f"{threads} thread(s)" if device == "cpu" else f"{session.device}, copies in and out included"
        click.echo(f"artifact {size} bytes; latency median {statistics.median(timings):.3f} ms, "
                   f"min {min(timings):.3f} ms over {repeat} runs ({where})")


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--artifact", type=click.Path(dir_okay=False, path_type=Path), help="an .aot built from MODEL (default: compile MODEL now)")
@click.option("--shape", "shape", multiple=True, help="fix an input's shape: NAME=1x3x224x224 (repeatable)")
@click.option("--bind", "bind", multiple=True, help="fix an input to a constant: NAME=FILE.npy (repeatable, ONNX)")
@click.option("--input", "inputs", multiple=True, help="NAME=FILE.npy (repeatable); missing inputs are seeded")
@click.option("--cpu", default="native", show_default=True, help="CPU to compile for (this machine must run it)")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="worker threads of the compiled run")
@click.option("--seed", type=int, default=0, show_default=True, help="seed for the inputs")
@click.option("--atol", type=float, default=1e-4, show_default=True, help="absolute tolerance")
@click.option("--rtol", type=float, default=1e-3, show_default=True, help="relative tolerance")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@DONATION_OPTIONS[0]
@DONATION_OPTIONS[1]
def verify(model: Path, artifact: Path | None, shape: tuple[str, ...], bind: tuple[str, ...], inputs: tuple[str, ...],
           cpu: str, threads: int, seed: int, atol: float, rtol: float, as_json: bool, donate: tuple[str, ...],
           no_infer_donation: bool) -> None:
    """Compile MODEL (or take --artifact), run it and onnxruntime on the same inputs, compare
    every output; on a mismatch name the first kernel (or pass) that diverges. Exit status 1
    on a mismatch or a bad model, 2 on a usage error."""
    from aot.verify import format_report, verify as run_verify

    try:
        known = _model_input_names(model)
        if artifact is not None and (donate or no_infer_donation):
            raise ArgumentError("--donate and --no-infer-donation apply to the compile: not with --artifact")
        report = run_verify(model, shapes=parse_shape_option(shape), bind=_load_arrays(bind, "--bind", known),
                            inputs=_load_arrays(inputs, "--input", known), artifact=artifact, cpu=cpu, threads=threads,
                            seed=seed, atol=atol, rtol=rtol, donate=parse_donate_option(donate, known),
                            infer_donation=not no_infer_donation)
    except AotError as err:
        _fail(err)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_report(report))
    if not report.ok:
        sys.exit(EXIT_FAILED)


def _model_input_names(model: Path) -> list[str]:
    """The ONNX model's input names ([] for other formats or an unreadable file: the compile says why).
    It reads the whole model (resnet18: 0.3-0.7 s before the compile reads it again), so callers
    ask only when an option needs the names to split NAME=VALUE."""
    if model.suffix in (".mlir", ".stablehlo"):
        return []
    try:
        from aot.importers.onnx import load_model

        return [i.name for i in load_model(model).graph.input]
    except AotError:
        return []


def output_file_name(name: str) -> str:
    """The .npy file for output NAME: the name itself, with '/', '\\', NUL and '%' percent-encoded
    so that every output is one file inside --output-dir ('gpu_0/softmax_1' -> 'gpu_0%2Fsoftmax_1.npy')."""
    return "".join(f"%{ord(ch):02X}" if ch in "%/\\\0" else ch for ch in name) + ".npy"


def _save_output(output_dir: Path, name: str, value: Any) -> None:
    import numpy as np

    path = output_dir / output_file_name(name)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        np.save(path, value)
    except OSError as err:
        _fail(AotError(f"cannot write output '{name}' to '{path}': {err.strerror or err}"))
    if path.name != f"{name}.npy":
        click.echo(f"wrote output '{name}' to {path}", err=True)


def _random_input(rng: Any, shape: list[int], dtype: Any) -> Any:
    import numpy as np

    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


@main.command()
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the manifest, the tooling section and section sizes as JSON")
@click.option("--extract", type=click.Path(file_okay=False, path_type=Path), help="write every section to a file in DIR")
@click.option("--memory-plan", "memory_plan", type=click.Path(dir_okay=False, path_type=Path),
              help="draw the arena plan (buffers over time) as SVG")
@click.option("--graph", "graph", type=click.Path(dir_okay=False, path_type=Path),
              help="draw the kernel graph with fused ops grouped: .svg or .dot")
def inspect(artifact: Path, as_json: bool, extract: Path | None, memory_plan: Path | None, graph: Path | None) -> None:
    """Show what is inside ARTIFACT."""
    from aot.driver import check_output_path
    from aot.inspect import describe, extract_sections, summary, write_graph, write_memory_plan

    try:
        for path in (memory_plan, graph):
            if path is not None:
                check_output_path(path, artifact, "artifact")
        if extract is not None:
            _make_dir(extract, "--extract")
        info = describe(artifact)
        if extract is not None:
            for path in extract_sections(artifact, extract):
                click.echo(f"wrote {path}", err=True)
        if memory_plan is not None:
            write_memory_plan(info, memory_plan)
            click.echo(f"wrote {memory_plan}", err=True)
        if graph is not None:
            write_graph(info, graph)
            click.echo(f"wrote {graph}", err=True)
    except AotError as err:
        _fail(err)
    click.echo(json.dumps(info, indent=2) if as_json else summary(info))


# ---- CI gates (aot/gates/): bench, check, diff ----
# Their exit status: 0 done (check: every budget met), 1 (check only) a budget broken,
# 2 anything that stopped the measuring: a usage error, a missing or damaged artifact, a
# failed run. So a CI job tells a broken budget from a broken job.

def _gate_fail(err: AotError) -> NoReturn:
    click.echo(f"error: {err.cli_message}", err=True)
    sys.exit(EXIT_USAGE)


def _unit_option(parse: Callable[[str], Any]) -> Callable[[click.Context, click.Parameter, str | None], Any]:
    """A click callback parsing a budget value (aot/gates/units.py); a bad one is a usage error."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except ArgumentError as err:
            raise click.BadParameter(str(err)) from None
    return callback


def _size(value: str) -> int:
    from aot.gates.units import parse_size

    return parse_size(value)


def _duration(value: str) -> float:
    from aot.gates.units import parse_duration_ms

    return parse_duration_ms(value)


def _percent(value: str) -> float:
    from aot.gates.units import parse_percent

    return parse_percent(value)


_existing_artifact = click.Path(exists=True, dir_okay=False, path_type=Path)

RUN_OPTIONS = [
    click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="worker threads"),
    click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True, help="timed runs"),
    click.option("--warmup", type=click.IntRange(min=0), default=5, show_default=True, help="untimed runs first"),
    click.option("--seed", type=int, default=0, show_default=True, help="seed for the random inputs"),
    click.option("--shape", "shape", multiple=True,
                 help="an input's shape where the artifact leaves dims dynamic: NAME=1x3x224x224 (repeatable)"),
]


def _with_run_options(fn: Any) -> Any:
    for option in reversed(RUN_OPTIONS):
        fn = option(fn)
    return fn


@main.command()
@click.argument("artifact", type=_existing_artifact)
@_with_run_options
@click.option("--compare-onnx", "compare_onnx", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="also time onnxruntime on this model, interleaved run by run, same inputs and threads")
@click.option("--json", "as_json", is_flag=True, help="print the measurements as JSON")
def bench(artifact: Path, threads: int, runs: int, warmup: int, seed: int, shape: tuple[str, ...],
          compare_onnx: Path | None, as_json: bool) -> None:
    """Latency (median, p90), cold start and peak memory (a fresh process), and size of ARTIFACT;
    with --compare-onnx, onnxruntime beside it and the ratio aot/onnxruntime."""
    from aot.gates.bench import BenchConfig, bench as run_bench, format_bench

    config = BenchConfig(threads=threads, runs=runs, warmup=warmup, seed=seed, shapes=parse_shape_option(shape),
                         compare_onnx=compare_onnx)
    try:
        report = run_bench(artifact, config)
    except AotError as err:
        _gate_fail(err)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_bench(report))


@main.command()
@click.argument("artifact", type=_existing_artifact)
@click.option("--max-size", "max_size", metavar="SIZE", callback=_unit_option(_size),
              help="largest artifact file: 5MB, 512KiB, ...")
@click.option("--max-latency-ms", "max_latency_ms", metavar="TIME", callback=_unit_option(_duration),
              help="largest median latency: 12 (ms), 12ms, 0.5s")
@click.option("--max-memory", "max_memory", metavar="SIZE", callback=_unit_option(_size),
              help="largest peak resident memory of a fresh process that opens and runs it: 100MB")
@click.option("--baseline", type=_existing_artifact, help="an artifact to compare latency and size against")
@click.option("--max-regression", "max_regression", metavar="PERCENT", callback=_unit_option(_percent),
              help="largest growth of median latency and of size over --baseline: 5%")
@_with_run_options
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def check(artifact: Path, max_size: int | None, max_latency_ms: float | None, max_memory: int | None,
          baseline: Path | None, max_regression: float | None, threads: int, runs: int, warmup: int, seed: int,
          shape: tuple[str, ...], as_json: bool) -> None:
    """Check ARTIFACT against size, latency and memory budgets, for CI. Exit status 0 when
    every budget is met, 1 when one is broken, 2 on a usage error or a damaged artifact."""
    from aot.gates.check import Budgets, RunConfig, evaluate, format_report, measure, passed, report_json

    budgets = Budgets(max_size_bytes=max_size, max_latency_ms=max_latency_ms, max_memory_bytes=max_memory,
                      baseline=baseline, max_regression_pct=max_regression)
    config = RunConfig(threads=threads, runs=runs, warmup=warmup, seed=seed, shapes=parse_shape_option(shape))
    try:
        measurements = measure(artifact, budgets, config)
    except AotError as err:
        _gate_fail(err)
    rows = evaluate(budgets, measurements)
    if as_json:
        click.echo(json.dumps(report_json(str(artifact), budgets, measurements, rows), indent=2))
    else:
        click.echo(format_report(str(artifact), rows))
    if not passed(rows):
        sys.exit(EXIT_FAILED)


@main.command()
@click.argument("a", type=_existing_artifact)
@click.argument("b", type=_existing_artifact)
@click.option("--json", "as_json", is_flag=True, help="print the differences as JSON")
def diff(a: Path, b: Path, as_json: bool) -> None:
    """What changed from artifact A to B: bytes per section and per kernel, the manifest
    (inputs, outputs, versions, targets) and the plan (kernels, arena), largest change first."""
    from aot.gates.diff import diff_artifacts, format_diff

    try:
        result = diff_artifacts(a, b)
    except AotError as err:
        _gate_fail(err)
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else format_diff(result))
