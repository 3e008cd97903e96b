"""Shared plumbing of the ops: input checks, output shapes and the call into the C core.

CPU tensors are computed in place into preallocated torch outputs. CUDA tensors run on
the caller's current stream when the core has a CUDA kernel for the shape (workspace from
torch's allocator, no info array, no synchronisation); anything else goes through host memory.
"""

from __future__ import annotations

import ctypes
import threading

import torch
from torch.autograd import forward_ad as _fwad

from . import _lib
from ._lib import lib

QR_MODES = {"reduced": _lib.ML_QR_REDUCED, "r": _lib.ML_QR_R, "complete": _lib.ML_QR_COMPLETE}
# torch.linalg accepts either case.
UPLOS = {"L": _lib.ML_LOWER, "U": _lib.ML_UPPER, "l": _lib.ML_LOWER, "u": _lib.ML_UPPER}

# Whether the core was built with a usable CUDA backend (fixed for the process).
CUDA_CORE = bool(lib.ml_backend_available(b"cuda"))


def check_input(A, name: str, square: bool = False) -> None:
    """The errors torch.linalg users expect, raised before anything is computed."""
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"[metal_linalg.{name}] expected a torch.Tensor, got {type(A).__name__}")
    if A.is_complex():
        raise TypeError(
            f"[metal_linalg.{name}] complex input ({A.dtype}) is not supported: "
            "metal-linalg computes real float32"
        )
    if A.dim() < 2:
        raise ValueError(
            f"[metal_linalg.{name}] expected a tensor of shape [..., M, N] (at least 2 dims), "
            f"got shape {tuple(A.shape)}"
        )
    if square and A.shape[-1] != A.shape[-2]:
        raise ValueError(
            f"[metal_linalg.{name}] expected square matrices, got shape {tuple(A.shape)}"
        )


def check_qr_mode(mode: str, m: int, n: int) -> None:
    if mode not in QR_MODES:
        raise ValueError(
            f"[metal_linalg.qr] mode must be 'reduced', 'r' or 'complete', got {mode!r}"
        )
    if mode == "complete" and m != n:
        raise NotImplementedError(
            f"[metal_linalg.qr] mode='complete' is supported for square matrices only, got {m}x{n}"
        )


def check_uplo(UPLO: str, name: str) -> None:
    if UPLO not in UPLOS:
        raise ValueError(
            f"[metal_linalg.{name}] UPLO must be 'L' or 'U' (either case), got {UPLO!r}"
        )


def check_full_matrices(full_matrices: bool, m: int, n: int) -> None:
    if full_matrices and m != n:
        raise NotImplementedError(
            "[metal_linalg.svd] full_matrices=True is supported for square matrices only, "
            f"got {m}x{n}; use full_matrices=False"
        )


def eager(A: torch.Tensor) -> bool:
    """True when a public function may call run() directly instead of going through the
    dispatcher: plain eager CPU/CUDA tensors, no autograd (backward or forward mode), no
    compile or jit tracing, no functorch or dispatch/function modes. Saves tens of
    microseconds per call; results are identical."""
    return (
        not torch.compiler.is_compiling()
        and type(A) is torch.Tensor
        and not (A.requires_grad and _grad_enabled())
        and (A.is_cpu or A.is_cuda)
        and _fwad._current_level < 0
        and _tracing_state() is None
        and _dispatch_depth() == 0
        and not _function_mode()
        and not _functorch_wrapped(A)
    )


def eager2(A: torch.Tensor, B: torch.Tensor) -> bool:
    """eager(A) and eager(B), the process-wide tests made once."""
    return (
        not torch.compiler.is_compiling()
        and type(A) is torch.Tensor
        and type(B) is torch.Tensor
        and not ((A.requires_grad or B.requires_grad) and _grad_enabled())
        and (A.is_cpu or A.is_cuda)
        and (B.is_cpu or B.is_cuda)
        and _fwad._current_level < 0
        and _tracing_state() is None
        and _dispatch_depth() == 0
        and not _function_mode()
        and not _functorch_wrapped(A)
        and not _functorch_wrapped(B)
    )


# eager()'s queries, looked up once (they are on every call's path).
_grad_enabled = torch.is_grad_enabled
_tracing_state = torch._C._get_tracing_state
_dispatch_depth = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def capturing() -> bool:
    """torch.compile or torch.jit.trace is recording a graph: the public functions call the
    custom ops, which both capture (the autograd.Function path with its jvp is not traceable
    by Dynamo, and the tracer records only dispatcher ops)."""
    return torch.compiler.is_compiling() or torch._C._get_tracing_state() is not None


def grad_wanted(A: torch.Tensor) -> bool:
    return A.requires_grad and torch.is_grad_enabled()


def check_no_tangent(A: torch.Tensor, name: str) -> None:
    """The custom ops have a backward formula only: a forward-mode tangent on their input
    would be dropped, so it is an error (the public functions implement the jvp)."""
    if _fwad._current_level >= 0 and _fwad.unpack_dual(A).tangent is not None:
        raise RuntimeError(
            f"[metal_linalg.{name}] forward-mode AD through torch.ops.metal_linalg.{name} is "
            f"not supported; metal_linalg_torch.{name} implements it"
        )


def safe_div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den, exactly zero where both are zero: a zero (or absent) gradient or tangent of
    the vectors contributes nothing across a repeated eigen/singular value, where the
    gradient of the values alone is defined; a nonzero one still gives inf/NaN, as in torch.
    Elsewhere exactly num / den (also its derivatives)."""
    both = (num == 0) & (den == 0)
    return num / torch.where(both, torch.ones_like(den), den)


def to_float32(A: torch.Tensor) -> torch.Tensor:
    return A if A.dtype == torch.float32 else A.to(torch.float32)


# Per (op, flags): a function (batch, m, n, k) -> the output shapes, generated once from the
# core's op table (as fast as written-out shapes: this is on every call's path).
_SHAPES = {}


def _shape_items(op: str, flags: int) -> list:
    """Per output: its sizes as Python source ("*b, m, n"; "0" for an absent output)."""
    items = []
    for symbols in _lib.output_symbols(_lib.OP_ID[op], flags):
        if symbols is not None and not set(symbols) <= {"m", "n", "k"}:
            raise RuntimeError(f"[metal_linalg.{op}] unexpected output dimensions {symbols}")
        items.append("0" if symbols is None else "*b, " + ", ".join(symbols))
    return items


def _shape_function(op: str, flags: int):
    items = ("(" + item + ",)" for item in _shape_items(op, flags))
    return eval("lambda b, m, n, k: [" + ", ".join(items) + "]")


def output_shapes(op: str, batch: tuple, m, n, k, flags: int) -> list:
    """Shapes of the op's outputs (torch.linalg's shapes, also for 0-size; an output the op
    does not have under flags is an empty (0,) tensor, as qr mode 'r''s Q); k = min(m, n)."""
    fn = _SHAPES.get((op, flags))
    if fn is None:
        fn = _SHAPES[(op, flags)] = _shape_function(op, flags)
    return fn(batch, m, n, k)


def _readable(A: torch.Tensor) -> torch.Tensor:
    """A float32, contiguous tensor whose memory holds its values: the negative and conjugate
    bits (torch._neg_view, .conj() of a complex tensor and its .imag) are lazy flags that
    data_ptr() does not apply, so they are materialised first."""
    if A.dtype != torch.float32:
        return A.to(torch.float32).contiguous()  # the conversion's copy applies both bits
    if A.is_neg():  # a real tensor has no conjugate bit; checking costs less than resolving
        A = A.resolve_neg()
    return A.contiguous()


_P1 = ctypes.c_void_p * 1
_P3 = ctypes.c_void_p * 3
_I3 = ctypes.c_int64 * 3
# ml_run's argument arrays, one set per thread (filling them costs less than building them).
_ARGS = threading.local()


def _new_args() -> tuple:
    ins, sizes, ptrs = _P1(), _I3(), _P3()
    addr = tuple(ctypes.addressof(x) for x in (ins, sizes, ptrs))
    _ARGS.v = ins, sizes, ptrs, addr
    return _ARGS.v


def _c_call(op, exec_ptr, a, batch, m, n, flags, outs, info) -> None:
    try:
        ins, sizes, ptrs, addr = _ARGS.v
    except AttributeError:
        ins, sizes, ptrs, addr = _new_args()
    ins[0] = a
    sizes[:] = batch, m, n
    # outputs in the table's order; an empty Q (qr mode 'r') passes NULL
    ptrs[: len(outs)] = [t.data_ptr() or None for t in outs]
    status = lib.ml_run(exec_ptr, _lib.OP_ID[op], addr[0], addr[1], flags, addr[2], info)
    if status != _lib.ML_OK:  # the core's warnings all arise at import or in settings calls
        _lib.check(status, op)


# Per (op, flags): the whole host call of a float32 contiguous CPU tensor as one generated
# function (A, batch shape, batch, m, n, info pointer) -> the new outputs: the output
# allocation (torch.empty(*sizes) without dtype=, the fastest form, with float32 the default
# dtype) and ml_run's argument arrays written out, without loops or lookups. This is the
# whole Python cost of a small call, which for a few 4x4 matrices is most of its time.
_CPU = {}
_F32 = torch.float32
_default_dtype = torch.get_default_dtype


def _cpu_function(op: str, flags: int):
    items = _shape_items(op, flags)
    names = [f"o{i}" for i in range(len(items))]
    body = ["def call(A, b, batch, m, n, info):", "    k = m if m < n else n"]
    body += [f"    {o} = empty({item})" for o, item in zip(names, items)]
    body += [
        "    try:",
        "        ins, sizes, ptrs, addr = _ARGS.v",
        "    except AttributeError:",
        "        ins, sizes, ptrs, addr = _new_args()",
        "    ins[0] = A.data_ptr()",
        "    sizes[0] = batch",
        "    sizes[1] = m",
        "    sizes[2] = n",
    ]
    # an absent output (Q of qr mode 'r') is an empty tensor and a NULL pointer
    body += [
        f"    ptrs[{i}] = {'None' if item == '0' else o + '.data_ptr()'}"
        for i, (o, item) in enumerate(zip(names, items))
    ]
    body += [
        f"    status = ml_run(None, {_lib.OP_ID[op]}, addr[0], addr[1], {flags}, addr[2], info)",
        "    if status:",
        f"        check(status, {op!r})",
        f"    return [{', '.join(names)}]",
    ]
    scope = {
        "empty": torch.empty,
        "_ARGS": _ARGS,
        "_new_args": _new_args,
        "ml_run": lib.ml_run,
        "check": _lib.check,
    }
    # A file name of its own, so that tracebacks and profiles name the op.
    source = compile("\n".join(body), f"<metal_linalg_torch: {op} host call>", "exec")
    exec(source, scope)  # noqa: S102 (source from the core's op table only)
    return scope["call"]


# torch's raw current-stream query (CUDA builds of torch), looked up once.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(index: int) -> int:
    """cudaStream_t of torch's current stream on device `index` (the raw handle, skipping the
    Stream object torch.cuda.current_stream builds: a few microseconds per call)."""
    if _RAW_STREAM is not None:
        return _RAW_STREAM(index)
    return torch.cuda.current_stream(index).cuda_stream


def _cuda_exec(A: torch.Tensor):
    device = A.device
    index = device.index if device.index is not None else torch.cuda.current_device()
    ex = _lib.MlExec()
    ex.memory = _lib.ML_MEMORY_CUDA
    ex.device = index
    ex.stream = _current_stream(index)
    return ex


def _cuda_plan(ex, op: str, batch: int, m: int, n: int, flags: int):
    """The core's one routing decision for a CUDA call: its workspace bytes when it runs on
    the GPU, or None when the core would rather have host buffers (the caller copies)."""
    memory = ctypes.c_int32(0)
    nbytes = ctypes.c_int64(0)
    sizes = _I3(batch, m, n)
    _lib.check(
        lib.ml_plan(
            ctypes.byref(ex),
            _lib.OP_ID[op],
            ctypes.addressof(sizes),
            flags,
            ctypes.byref(memory),
            ctypes.byref(nbytes),
            None,
        ),
        op,
    )
    return nbytes.value if memory.value == _lib.ML_MEMORY_CUDA else None


def _run_cuda(op, A, ex, batch, m, n, flags, outs, info, nbytes: int) -> None:
    # Stream-ordered caching allocator: freeing the workspace after enqueueing is safe (a later
    # allocation on the same stream reuses it only after this call's kernels in stream order).
    workspace = None
    if nbytes > 0:
        workspace = torch.empty(nbytes, dtype=torch.uint8, device=A.device)
        ex.workspace = workspace.data_ptr()
        ex.workspace_bytes = nbytes
    # No info array unless an *_ex function asks: a non-finite or unconverged matrix shows as
    # NaN in its outputs, and the C API accepts NULL.
    info_ptr = info.data_ptr() if info is not None else None
    _c_call(op, ctypes.byref(ex), A.data_ptr(), batch, m, n, flags, outs, info_ptr)


def _host_empty(shapes: list) -> list:
    # torch.empty(*sizes) without dtype= parses its arguments fastest: about half the time of
    # torch.empty(shape, dtype=...) (small-matrix hot path; every shape has at least one dim).
    empty = torch.empty
    if torch.get_default_dtype() == torch.float32:
        return [empty(*s) for s in shapes]
    return [empty(*s, dtype=torch.float32) for s in shapes]


def run(op: str, A: torch.Tensor, flags: int, with_info: bool = False) -> list:
    """Compute op on A (any real dtype, any layout, any device); float32 outputs on A's device.
    with_info: also return the per-matrix info words (int32, batch shape) as the last item."""
    shape = A.shape
    m, n = shape[-2], shape[-1]
    batch_shape = shape[:-2]
    batch = 1
    for dim in batch_shape:
        batch *= dim
    if batch == 0 or m == 0 or n == 0:
        # Non-square complete/full modes are rejected earlier, so every output is empty.
        shapes = output_shapes(op, batch_shape, m, n, min(m, n), flags)
        outs = [torch.empty(s, dtype=torch.float32, device=A.device) for s in shapes]
        if with_info:
            outs.append(torch.zeros(batch_shape, dtype=torch.int32, device=A.device))
        return outs
    if A.is_cpu and _default_dtype() is _F32:
        fn = _CPU.get((op, flags))
        if fn is None:
            fn = _CPU[(op, flags)] = _cpu_function(op, flags)
        A = A.contiguous() if A.dtype is _F32 and not A.is_neg() else _readable(A)
        if with_info:
            info = torch.empty(batch_shape, dtype=torch.int32)
            return [*fn(A, batch_shape, batch, m, n, info.data_ptr()), info]
        return fn(A, batch_shape, batch, m, n, None)
    A = _readable(A)
    shapes = output_shapes(op, batch_shape, m, n, min(m, n), flags)
    device = A.device
    if A.is_cuda and CUDA_CORE:
        ex = _cuda_exec(A)
        nbytes = _cuda_plan(ex, op, batch, m, n, flags)
        if nbytes is not None:
            outs = [torch.empty(s, dtype=torch.float32, device=device) for s in shapes]
            info = torch.empty(batch_shape, dtype=torch.int32, device=device) if with_info else None
            _run_cuda(op, A, ex, batch, m, n, flags, outs, info, nbytes)
            return outs + [info] if with_info else outs
    # Anything else (CUDA calls the core routes to the host, MPS, a default dtype other than
    # float32, ...) goes through host memory.
    outs = _host_empty(shapes)
    info = torch.empty(batch_shape, dtype=torch.int32) if with_info else None
    host = A.cpu()  # keep the copy alive for the whole call: data_ptr() does not
    _c_call(op, None, host.data_ptr(), batch, m, n, flags, outs, _ptr(info))
    outs = outs + [info] if with_info else outs
    return [t.to(device) for t in outs]


def _ptr(t):
    return None if t is None else t.data_ptr()


def check_info(info: torch.Tensor, name: str) -> None:
    """check_errors=True of the *_ex functions: torch.linalg.LinAlgError for the first matrix
    that did not converge or had a non-finite entry."""
    bad = (info & (_lib.ML_INFO_NOT_CONVERGED | _lib.ML_INFO_NONFINITE)) != 0
    if bool(bad.any()):
        flat = info.reshape(-1).cpu()
        i = int(bad.reshape(-1).nonzero()[0, 0])
        why = "did not converge" if flat[i] & _lib.ML_INFO_NOT_CONVERGED else "has NaN/Inf entries"
        where = f" (batch index {i})" if info.dim() else ""
        raise torch.linalg.LinAlgError(f"[metal_linalg.{name}] the input matrix{where} {why}")


def run_ex(op: str, A: torch.Tensor, flags: int, public, check_errors: bool, name: str) -> list:
    """The *_ex functions: the op's outputs and the per-matrix info words. Eagerly, one call
    computes both; when A requires grad (or under compile), the outputs come from `public`
    (differentiable) and the info from a second, gradient-free call."""
    if eager(A):
        out = run(op, A, flags, with_info=True)
    else:
        info = torch.ops.metal_linalg.info(A.detach(), op, flags)
        out = [*public(), info]
    if check_errors:
        check_info(out[-1], name)
    return out


def fake(op: str, A: torch.Tensor, flags: int) -> list:
    m, n = A.shape[-2], A.shape[-1]
    shapes = output_shapes(op, tuple(A.shape[:-2]), m, n, torch.sym_min(m, n), flags)
    return [A.new_empty(s, dtype=torch.float32) for s in shapes]


def register_vmap(op, n_outputs: int) -> None:
    """vmap over an op: the ops are batched already, so move the mapped dim to the front."""

    def rule(info, in_dims, A, *flags):
        if in_dims[0] is None:
            return op(A, *flags), (None,) * n_outputs if n_outputs > 1 else None
        out = op(A.movedim(in_dims[0], 0), *flags)
        if n_outputs == 1:
            return out, 0
        # qr mode 'r' returns an unbatched empty Q.
        dims = tuple(None if t.dim() == 1 and t.numel() == 0 else 0 for t in out)
        return out, dims

    torch.library.register_vmap(op, rule)


def register_values_only(op, name: str, vectors: str) -> None:
    """The autograd and vmap rules of an op that returns values only (eigvalsh, svdvals): no
    derivative of its own, as it computes no `vectors` (the public function computes them when
    the input requires grad)."""

    def backward(ctx, *grads):
        raise RuntimeError(
            f"[metal_linalg.{name}] the op computes no {vectors}, so it has no derivative; "
            f"metal_linalg_torch.{name} computes them when the input requires grad"
        )

    op.register_autograd(backward, setup_context=lambda ctx, inputs, output: None)
    register_vmap(op, 1)


@torch.library.custom_op(
    "metal_linalg::info", mutates_args=(), schema="(Tensor A, str op, int flags) -> Tensor"
)
def info_op(A: torch.Tensor, op: str, flags: int) -> torch.Tensor:
    """The per-matrix info words of op on A (the *_ex functions outside the eager fast path:
    an op of its own, so compile, jit.trace and vmap see it)."""
    if op not in _lib.OPS:  # the decompositions (the linear systems return their info)
        raise ValueError(f"[metal_linalg.info] unknown op {op!r}; ops: {', '.join(_lib.OPS)}")
    if not -(2**31) <= flags < 2**31:  # keeps ctypes from truncating a huge int
        raise ValueError(f"[metal_linalg.info] invalid flags {flags} for {op}")
    try:  # the core's op table checks the flags
        output_shapes(op, (), 1, 1, 1, flags)
    except ValueError as err:
        raise ValueError(f"[metal_linalg.info] invalid flags {flags} for {op}: {err}") from None
    check_input(A, "info", square=op.startswith("eig"))
    return run(op, A, flags, with_info=True)[-1]


@info_op.register_fake
def _(A, op, flags):
    return A.new_empty(A.shape[:-2], dtype=torch.int32)


def _info_vmap(info, in_dims, A, op, flags):
    if in_dims[0] is None:
        return info_op(A, op, flags), None
    return info_op(A.movedim(in_dims[0], 0), op, flags), 0


torch.library.register_vmap(info_op, _info_vmap)
