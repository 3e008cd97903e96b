"""The linear systems: cholesky, solve, inv, solve_triangular, lu_factor (and the *_ex forms) with
torch.linalg's arguments, results and errors, and lu, lu_solve, det and slogdet built on
lu_factor and solve_triangular. The core computes them on the CPU through LAPACK; CUDA tensors
run the core's GPU kernels where its plan keeps the call on the device, else go through a host
copy and come back on their device.

Each is a torch.library custom op (torch.ops.metal_linalg.<op>) with a fake, a backward
(torch.linalg's formulas, computed with torch ops, so double backward works) and a vmap rule;
the public functions call the core directly for plain eager tensors and the op otherwise
(torch.compile, torch.jit.trace) or an autograd.Function over it (backward, torch.func's
grad, vjp, jacrev, vmap). Forward-mode AD (jvp, jacfwd) is not implemented: a tangent on an
input raises, never a silently dropped derivative. lu, lu_solve and slogdet are torch ops over
the lu_factor and solve_triangular functions (their gradients come through those); det is an
op of its own, whose gradient is right at singular matrices too (det_cofactor).

The info word (the *_ex functions): 0; LAPACK's info k > 0 (cholesky: the leading minor of
order k is not positive definite; solve, inv, lu_factor: U(k,k) is exactly zero, the first
such k; as torch); or INFO_NONFINITE (the input has a NaN/Inf entry where the op reads it;
torch reports 0 there). Either way that matrix's result is NaN (lu_factor: only for NaN/Inf
input; a singular matrix keeps its factorization), the rest of the batch is unaffected.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import torch

from . import _dispatch as d
from . import _lib
from ._lib import lib

ML_LS_UPPER = 1
ML_LS_RIGHT = 2
ML_LS_UNIT = 4
# ML_INFO_LS_NONFINITE of metal_linalg.h: a NaN/Inf entry in a matrix the op reads.
INFO_NONFINITE = 0x40000000

_P2 = ctypes.c_void_p * 2
_P1 = ctypes.c_void_p * 1
_I4 = ctypes.c_int64 * 4


def _check_tensor(A, name: str, what: str = "A", min_dim: int = 2) -> None:
    if not isinstance(A, torch.Tensor):
        raise TypeError(
            f"[metal_linalg.{name}] expected a torch.Tensor for {what}, got {type(A).__name__}"
        )
    if A.is_complex():
        raise TypeError(
            f"[metal_linalg.{name}] complex input ({A.dtype}) is not supported: "
            "metal-linalg computes real float32"
        )
    if A.dim() < min_dim:
        raise ValueError(
            f"[metal_linalg.{name}] {what} must have at least {min_dim} dimensions, "
            f"got shape {tuple(A.shape)}"
        )


def _check_square(A, name: str) -> None:
    _check_tensor(A, name)
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(
            f"[metal_linalg.{name}] A must be batches of square matrices, got shape "
            f"{tuple(A.shape)}"
        )


def _batch_shape(a: torch.Size, b: torch.Size) -> torch.Size:
    """The broadcast of two batch shapes (torch.broadcast_shapes, without its cost when they
    are equal, the common case)."""
    return a if a == b else torch.broadcast_shapes(a, b)


def _check_rhs(A, B, left: bool, name: str) -> None:
    """B's matrix shape against A's for AX = B (left) or XA = B."""
    _check_tensor(B, name, "B")
    if B.device != A.device:
        raise ValueError(
            f"[metal_linalg.{name}] A and B must be on the same device, got {A.device} and "
            f"{B.device}"
        )
    n = A.shape[-1]
    if B.shape[-2 if left else -1] != n:
        eq = "AX = B" if left else "XA = B"
        raise ValueError(
            f"[metal_linalg.{name}] incompatible shapes of A and B for the equation {eq} "
            f"({A.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]})"
        )
    try:
        _batch_shape(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"[metal_linalg.{name}] the batch dimensions of A {tuple(A.shape[:-2])} and B "
            f"{tuple(B.shape[:-2])} do not broadcast"
        ) from None


# ---- the call into the core ----


_DTYPES = {_lib.ML_DTYPE_FLOAT32: torch.float32, _lib.ML_DTYPE_INT32: torch.int32}
_OUTPUTS = {}


def _outputs(op: str, flags: int) -> list:
    """Per output of op under flags, from the core's op table: its dimensions as symbols ('m',
    'n', 'k' = min(m, n), 'r' = the right-hand side's columns) and its torch dtype."""
    key = (op, flags)
    if key not in _OUTPUTS:
        out = []
        for i, symbols in enumerate(_lib.output_symbols(_lib.OP_ID[op], flags)):
            dtype, ndim = ctypes.c_int32(0), ctypes.c_int32(0)
            _lib.check(
                lib.ml_output_desc(
                    _lib.OP_ID[op],
                    flags,
                    i,
                    None,
                    ctypes.byref(ndim),
                    None,
                    ctypes.addressof(dtype),
                ),
                op,
            )
            out.append((symbols, _DTYPES[dtype.value]))
        _OUTPUTS[key] = out
    return _OUTPUTS[key]


def _shapes(op: str, flags: int, batch_shape, m, n, nrhs) -> list:
    """(shape, dtype) of each output of op for this call."""
    values = {"m": m, "n": n, "k": min(m, n), "r": nrhs}
    return [
        ((*batch_shape, *(values[s] for s in symbols)), dtype)
        for symbols, dtype in _outputs(op, flags)
    ]


def _cuda_route(A: torch.Tensor, op: str, sizes, flags: int):
    """CUDA tensors: the core's exec descriptor when its plan keeps the call on the device
    (its kernels or its blocked path cover the shape; the latter's workspace allocated here),
    else None (the data goes through host memory, LAPACK on the CPU)."""
    if not (A.is_cuda and d.CUDA_CORE):
        return None
    ex = d._cuda_exec(A)
    memory = ctypes.c_int32(0)
    nbytes = ctypes.c_int64(0)
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
    if memory.value != _lib.ML_MEMORY_CUDA:
        return None
    if nbytes.value > 0:
        workspace = torch.empty(nbytes.value, dtype=torch.uint8, device=A.device)
        ex.workspace = workspace.data_ptr()
        ex.workspace_bytes = nbytes.value
        ex._keep = workspace  # stream-ordered allocator: freed after the call is enqueued
    return ex


# Per (op, flags): the whole host call of float32 CPU tensors whose batch shapes agree, as one
# generated function (A, B, batch shape, batch, m, n, nrhs) -> (outputs..., info): the output
# allocation and ml_run's argument arrays written out, without loops or lookups (as the
# decompositions' _dispatch._cpu_function). For a few small matrices this is most of a call.
_CPU = {}
_ARGS = threading.local()  # ml_run's argument arrays, one set per thread
_F32 = torch.float32


def _new_args() -> tuple:
    ins, sizes, ptrs = _P2(), _I4(), _P2()
    addr = tuple(ctypes.addressof(x) for x in (ins, sizes, ptrs))
    _ARGS.v = ins, sizes, ptrs, addr
    return _ARGS.v


class _InfoWords:
    """A thread's info words for the calls whose caller only needs to know whether a matrix
    failed (the plain forms; solve_triangular's, which never raises): no tensor allocated."""

    def __init__(self, size: int):
        self.words = (ctypes.c_int32 * size)()
        self.addr = ctypes.addressof(self.words)
        self.view = np.frombuffer(self.words, dtype=np.int32)
        self.size = size

    def failed(self, batch: int, batch_shape):
        """None when every word of the call is 0, else the words as an int32 tensor."""
        if batch == 1:
            if not self.words[0]:
                return None
        elif not np.count_nonzero(self.view[:batch]):
            return None
        return torch.from_numpy(self.view[:batch].copy()).reshape(batch_shape)


_WORDS = threading.local()


def _info_words(batch: int) -> _InfoWords:
    words = getattr(_WORDS, "v", None)
    if words is None or words.size < batch:
        words = _WORDS.v = _InfoWords(max(batch, 64))
    return words


def _cpu_function(op: str, flags: int):
    outputs = _outputs(op, flags)
    if len(outputs) > 2:
        raise RuntimeError(f"[metal_linalg.{op}] unexpected output count {len(outputs)}")
    body = ["def call(A, B, b, batch, m, n, r, keep):", "    k = m if m < n else n"]
    names = []
    for i, (symbols, dtype) in enumerate(outputs):
        dims = ", ".join(["*b", *symbols])
        names.append(f"o{i}")
        if dtype is torch.float32:  # torch.empty(*sizes): the fastest form (float32 default)
            body.append(f"    o{i} = empty({dims})")
        else:
            body.append(f"    o{i} = empty(({dims},), dtype=int32)")
    body += [
        "    try:",
        "        ins, sizes, ptrs, addr = _ARGS.v",
        "    except AttributeError:",
        "        ins, sizes, ptrs, addr = _new_args()",
        "    if keep:",
        "        info = empty((*b,), dtype=int32)",
        "        ip = info.data_ptr()",
        "    else:",
        "        words = _words(batch)",
        "        ip = words.addr",
        "    ins[0] = A.data_ptr()",
        "    ins[1] = B.data_ptr() if B is not None else None",
        "    sizes[0] = batch",
        "    sizes[1] = m",
        "    sizes[2] = n",
        "    sizes[3] = r",
    ]
    body += [f"    ptrs[{i}] = {o}.data_ptr()" for i, o in enumerate(names)]
    body += [
        f"    status = ml_run(None, {_lib.OP_ID[op]}, addr[0], addr[1], {flags}, addr[2], ip)",
        "    if status:",
        f"        check(status, {op!r})",
        "    if not keep:",
        "        info = words.failed(batch, b)",
        f"    return ({', '.join(names)}, info)",
    ]
    scope = {
        "empty": torch.empty,
        "int32": torch.int32,
        "_ARGS": _ARGS,
        "_new_args": _new_args,
        "_words": _info_words,
        "ml_run": lib.ml_run,
        "check": _lib.check,
    }
    source = compile("\n".join(body), f"<metal_linalg_torch: {op} host call>", "exec")
    exec(source, scope)  # noqa: S102 (source from the core's op table only)
    return scope["call"]


def _plain_f32(t: torch.Tensor) -> bool:
    return t.is_cpu and t.dtype is _F32 and not t.is_neg()


def run(op: str, A: torch.Tensor, B, flags: int, keep: bool = True) -> tuple:
    """op on A (and the right-hand sides B, whose batch dimensions broadcast with A's): its
    outputs on A's device (float32; lu_factor's pivots int32) and the per-matrix info words
    (int32, the batch shape), last. keep=False: where no matrix failed the info may come back
    as None (CPU calls use a scratch array then: callers that only raise on a failure)."""
    shape = A.shape
    m, n = shape[-2], shape[-1]
    if (
        _plain_f32(A)
        and (B is None or (_plain_f32(B) and B.shape[:-2] == shape[:-2]))
        and d._default_dtype() is _F32
    ):
        batch_shape = shape[:-2]
        batch = 1
        for dim in batch_shape:
            batch *= dim
        if B is not None:
            nrhs = B.shape[-2] if flags & ML_LS_RIGHT else B.shape[-1]
        else:
            nrhs = 1
        if batch and m and n and nrhs:
            fn = _CPU.get((op, flags))
            if fn is None:
                fn = _CPU[(op, flags)] = _cpu_function(op, flags)
            return fn(
                A.contiguous(),
                None if B is None else B.contiguous(),
                batch_shape,
                batch,
                m,
                n,
                nrhs,
                keep,
            )
    if B is not None:
        batch_shape = _batch_shape(A.shape[:-2], B.shape[:-2])
        nrhs = B.shape[-2] if flags & ML_LS_RIGHT else B.shape[-1]
    else:
        batch_shape, nrhs = A.shape[:-2], 1
    shapes = _shapes(op, flags, batch_shape, m, n, nrhs)
    device = A.device
    batch = 1
    for dim in batch_shape:
        batch *= dim
    if batch == 0 or m == 0 or n == 0 or nrhs == 0:
        outs = [torch.zeros(shape, dtype=dtype, device=device) for shape, dtype in shapes]
        return (*outs, torch.zeros(batch_shape, dtype=torch.int32, device=device))
    sizes = _I4(batch, m, n, nrhs)
    ex = _cuda_route(A, op, sizes, flags)
    # The core's kernels on torch's current stream with no copies, or the host route (LAPACK)
    # through CPU copies that go back to A's device.
    if ex is not None and B is not None and B.device != device:
        raise ValueError(f"[metal_linalg.{op}] A and B must be on the same device")
    run_on = device if ex is not None else torch.device("cpu")
    a = d._readable(A.expand(*batch_shape, m, n)).to(run_on)
    outs = [torch.empty(shape, dtype=dtype, device=run_on) for shape, dtype in shapes]
    info = torch.empty(batch_shape, dtype=torch.int32, device=run_on)
    ptrs = (ctypes.c_void_p * len(outs))(*(t.data_ptr() for t in outs))
    if B is None:
        ins = _P1(a.data_ptr())
    else:
        b = d._readable(B.expand(*batch_shape, *B.shape[-2:])).to(run_on)
        ins = _P2(a.data_ptr(), b.data_ptr())
    status = lib.ml_run(
        ctypes.byref(ex) if ex is not None else None,
        _lib.OP_ID[op],
        ctypes.addressof(ins),
        ctypes.addressof(sizes),
        flags,
        ctypes.addressof(ptrs),
        info.data_ptr(),
    )
    _lib.check(status, op)
    if run_on != device:
        return (*(t.to(device) for t in outs), info.to(device))
    return (*outs, info)


# ---- errors as torch.linalg raises them ----


def _first_failure(info: torch.Tensor, failed):
    """(flat batch index, info) of the first matrix whose info `failed` accepts, or None."""
    if (
        type(info) is torch.Tensor
        and info.device.type == "cpu"
        and not torch._C._functorch.is_functorch_wrapped_tensor(info)
    ):
        # A plain CPU tensor: the same test on its NumPy view (no tensor ops per call), after
        # the cheapest test that every word is 0 (the common case).
        flat = info.reshape(-1).numpy()
        if not np.count_nonzero(flat):
            return None
        bad = failed(flat)
        if not bad.any():
            return None
        i = int(bad.nonzero()[0][0])
        return i, int(flat[i])
    if not bool(info.any()):  # one reduction (and one wait) when every word is 0
        return None
    bad = failed(info)
    if not bool(bad.any()):
        return None
    flat = info.reshape(-1).cpu()
    i = int(bad.reshape(-1).nonzero()[0, 0])
    return i, int(flat[i])


def _under_vmap(t: torch.Tensor) -> bool:
    """Whether t is batched by vmap at any level of torch.func's wrappers."""
    f = torch._C._functorch
    while f.is_functorch_wrapped_tensor(t):
        if f.is_batchedtensor(t):
            return True
        t = f.get_unwrapped(t)
    return False


_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_tracing_state = torch._C._get_tracing_state


def _raise(fn: str, info, failed, message) -> None:
    if info is None:  # run(..., keep=False): no matrix failed
        return
    if (
        type(info) is torch.Tensor
        and info.is_cpu
        and not _functorch_wrapped(info)
        and not (info.item() if info.dim() == 0 else np.count_nonzero(info.numpy()))
    ):
        return  # the common case, first: a plain CPU tensor of zeros (one matrix: its word)
    if _under_vmap(info) or _tracing_state() is not None:
        # Under vmap and jit.trace the info words cannot steer Python: a failed matrix's
        # result is NaN (the *_ex forms return the info to inspect after the transform).
        return
    hit = _first_failure(info, failed)
    if hit is None:
        return
    i, k = hit
    where = f"(Batch element {i}): " if info.dim() > 0 else ""
    raise torch.linalg.LinAlgError(f"{fn}: {where}{message(k)}")


def _cholesky_errors(info: torch.Tensor) -> None:
    _raise(
        "linalg.cholesky",
        info,
        lambda t: t != 0,
        lambda k: (
            "The factorization could not be completed because the input has NaN or Inf entries."
            if k == INFO_NONFINITE
            else "The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {k} is not positive-definite)."
        ),
    )


def _singular(info: torch.Tensor):
    """LAPACK's zero pivots; a NaN/Inf input is no error (a NaN result, as in torch)."""
    return (info != 0) & (info != INFO_NONFINITE)


def _solve_errors(info: torch.Tensor) -> None:
    _raise(
        "torch.linalg.solve",
        info,
        _singular,
        lambda k: "The solver failed because the input matrix is singular.",
    )


def _inv_errors(info: torch.Tensor) -> None:
    _raise(
        "linalg.inv",
        info,
        _singular,
        lambda k: (
            f"The diagonal element {k} is zero, the inversion could not be completed "
            "because the input matrix is singular."
        ),
    )


def _lu_factor_errors(info: torch.Tensor) -> None:
    _raise(
        "torch.linalg.lu_factor",
        info,
        _singular,
        lambda k: (
            f"U[{k},{k}] is zero and using it on lu_solve would result in a division by "
            "zero. If you still want to perform the factorization, consider calling "
            "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
        ),
    )


# ---- backward formulas (torch.linalg's), in torch ops ----


def cholesky_vjp(L: torch.Tensor, gL: torch.Tensor, upper: bool) -> torch.Tensor:
    """A = L L^T: gA = L^-T Phi(L^T gL) L^-1 with Phi the lower triangle, diagonal halved,
    made symmetric."""
    if upper:
        L, gL = L.mT, gL.mT
    P = (L.mT @ gL).tril()
    P = 0.5 * (P + P.tril(-1).mT)
    P = torch.linalg.solve_triangular(L.mT, P, upper=True, left=True)
    return torch.linalg.solve_triangular(L, P, upper=False, left=False)


def solve_vjp(A, X, gX, left: bool):
    """AX = B: gB = A^-T gX, gA = -gB X^T; XA = B: gB = gX A^-T, gA = -X^T gB."""
    gB = torch.linalg.solve(A.mT, gX, left=left)
    gA = -(gB @ X.mT) if left else -(X.mT @ gB)
    return gA, gB


def triangular_vjp(A, X, gX, upper: bool, left: bool, unit: bool):
    gB = torch.linalg.solve_triangular(A.mT, gX, upper=not upper, left=left, unitriangular=unit)
    gA = -(gB @ X.mT) if left else -(X.mT @ gB)
    offset = 1 if unit else 0
    gA = gA.triu(offset) if upper else gA.tril(-offset)
    return gA, gB


def _reduce(g, shape, dtype):
    """A gradient of the broadcast input back to its shape and dtype."""
    return g.sum_to_size(shape).to(dtype)


# ---- the custom ops ----


def _vmap(op, n_tensors: int, n_outputs: int):
    """vmap over an op: the ops are batched already (and broadcast A's batch dims against B's),
    so the mapped dims move to the front, followed by singleton dims that align the inputs'
    own batch dims for that broadcast; an unmapped input gets a broadcast mapped dim."""

    def rule(info, in_dims, *args):
        tensors, rest = args[:n_tensors], args[n_tensors:]
        dims = in_dims[:n_tensors]
        if all(dim is None for dim in dims):
            out = op(*args)
            return out, (None,) * n_outputs if n_outputs > 1 else None
        own = [t.dim() - 2 - (dim is not None) for t, dim in zip(tensors, dims)]
        width = max(own)
        moved = []
        for t, dim, k in zip(tensors, dims, own):
            t = t.movedim(dim, 0) if dim is not None else t.expand(info.batch_size, *t.shape)
            moved.append(t.reshape(t.shape[0], *([1] * (width - k)), *t.shape[1:]))
        out = op(*moved, *rest)
        return out, (0,) * n_outputs if n_outputs > 1 else 0

    torch.library.register_vmap(op, rule)


def _fake_rhs(op: str, A, B, flags: int):
    batch_shape = _batch_shape(A.shape[:-2], B.shape[:-2])
    n = A.shape[-1]
    nrhs = B.shape[-2] if flags & ML_LS_RIGHT else B.shape[-1]
    ((shape, dtype),) = _shapes(op, flags, batch_shape, n, n, nrhs)
    return A.new_empty(shape, dtype=dtype), A.new_empty(batch_shape, dtype=torch.int32)


@torch.library.custom_op(
    "metal_linalg::cholesky", mutates_args=(), schema="(Tensor A, bool upper) -> (Tensor, Tensor)"
)
def cholesky_op(A: torch.Tensor, upper: bool):
    _check_square(A, "cholesky")
    d.check_no_tangent(A, "cholesky")
    L, info = run("cholesky", A, None, ML_LS_UPPER if upper else 0)
    return L, info


@cholesky_op.register_fake
def _(A, upper):
    _check_square(A, "cholesky")
    return A.new_empty(A.shape, dtype=torch.float32), A.new_empty(A.shape[:-2], dtype=torch.int32)


def _cholesky_setup(ctx, inputs, output):
    ctx.upper = inputs[1]
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(output[0])


def _cholesky_backward(ctx, gL, _ginfo):
    (L,) = ctx.saved_tensors
    return cholesky_vjp(L, gL, ctx.upper).to(ctx.dtype), None


cholesky_op.register_autograd(_cholesky_backward, setup_context=_cholesky_setup)
_vmap(cholesky_op, 1, 2)


@torch.library.custom_op(
    "metal_linalg::solve",
    mutates_args=(),
    schema="(Tensor A, Tensor B, bool left) -> (Tensor, Tensor)",
)
def solve_op(A: torch.Tensor, B: torch.Tensor, left: bool):
    _check_square(A, "solve")
    _check_rhs(A, B, left, "solve")
    d.check_no_tangent(A, "solve")
    d.check_no_tangent(B, "solve")
    X, info = run("solve", A, B, 0 if left else ML_LS_RIGHT)
    return X, info


@solve_op.register_fake
def _(A, B, left):
    _check_square(A, "solve")
    _check_rhs(A, B, left, "solve")
    return _fake_rhs("solve", A, B, 0 if left else ML_LS_RIGHT)


def _save_rhs(ctx, A, B, X):
    """What the backward of an op with a right-hand side needs: A (float32) and the result,
    and the inputs' shapes and dtypes to reduce the broadcast gradients to."""
    ctx.shapes = (A.shape, A.dtype), (B.shape, B.dtype)
    ctx.save_for_backward(d.to_float32(A), X)


def _solve_setup(ctx, inputs, output):
    A, B, ctx.left = inputs
    _save_rhs(ctx, A, B, output[0])


def _solve_backward(ctx, gX, _ginfo):
    A, X = ctx.saved_tensors
    gA, gB = solve_vjp(A, X, gX, ctx.left)
    (a_shape, a_dtype), (b_shape, b_dtype) = ctx.shapes
    return _reduce(gA, a_shape, a_dtype), _reduce(gB, b_shape, b_dtype), None


solve_op.register_autograd(_solve_backward, setup_context=_solve_setup)
_vmap(solve_op, 2, 2)


@torch.library.custom_op(
    "metal_linalg::inv", mutates_args=(), schema="(Tensor A) -> (Tensor, Tensor)"
)
def inv_op(A: torch.Tensor):
    _check_square(A, "inv")
    d.check_no_tangent(A, "inv")
    X, info = run("inv", A, None, 0)
    return X, info


@inv_op.register_fake
def _(A):
    _check_square(A, "inv")
    return A.new_empty(A.shape, dtype=torch.float32), A.new_empty(A.shape[:-2], dtype=torch.int32)


def _inv_setup(ctx, inputs, output):
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(output[0])


def _inv_backward(ctx, gX, _ginfo):
    (X,) = ctx.saved_tensors
    return (-(X.mT @ gX @ X.mT)).to(ctx.dtype)


inv_op.register_autograd(_inv_backward, setup_context=_inv_setup)
_vmap(inv_op, 1, 2)


@torch.library.custom_op(
    "metal_linalg::solve_triangular",
    mutates_args=(),
    schema="(Tensor A, Tensor B, bool upper, bool left, bool unitriangular) -> Tensor",
)
def solve_triangular_op(
    A: torch.Tensor, B: torch.Tensor, upper: bool, left: bool, unitriangular: bool
):
    _check_square(A, "solve_triangular")
    _check_rhs(A, B, left, "solve_triangular")
    d.check_no_tangent(A, "solve_triangular")
    d.check_no_tangent(B, "solve_triangular")
    X, _ = run("solve_triangular", A, B, _triangular_flags(upper, left, unitriangular))
    return X


@solve_triangular_op.register_fake
def _(A, B, upper, left, unitriangular):
    _check_square(A, "solve_triangular")
    _check_rhs(A, B, left, "solve_triangular")
    flags = _triangular_flags(upper, left, unitriangular)
    return _fake_rhs("solve_triangular", A, B, flags)[0]


def _triangular_flags(upper: bool, left: bool, unitriangular: bool) -> int:
    return (
        (ML_LS_UPPER if upper else 0)
        | (0 if left else ML_LS_RIGHT)
        | (ML_LS_UNIT if unitriangular else 0)
    )


def _triangular_setup(ctx, inputs, output):
    A, B, ctx.upper, ctx.left, ctx.unit = inputs
    _save_rhs(ctx, A, B, output)


def _triangular_backward(ctx, gX):
    A, X = ctx.saved_tensors
    gA, gB = triangular_vjp(A, X, gX, ctx.upper, ctx.left, ctx.unit)
    (a_shape, a_dtype), (b_shape, b_dtype) = ctx.shapes
    return _reduce(gA, a_shape, a_dtype), _reduce(gB, b_shape, b_dtype), None, None, None


solve_triangular_op.register_autograd(_triangular_backward, setup_context=_triangular_setup)
_vmap(solve_triangular_op, 2, 1)


@torch.library.custom_op(
    "metal_linalg::lu_factor", mutates_args=(), schema="(Tensor A) -> (Tensor, Tensor, Tensor)"
)
def lu_factor_op(A: torch.Tensor):
    _check_tensor(A, "lu_factor")
    d.check_no_tangent(A, "lu_factor")
    LU, pivots, info = run("lu_factor", A, None, 0)
    return LU, pivots, info


@lu_factor_op.register_fake
def _(A):
    _check_tensor(A, "lu_factor")
    m, n = A.shape[-2], A.shape[-1]
    k = torch.sym_min(m, n)
    batch = A.shape[:-2]
    return (
        A.new_empty(A.shape, dtype=torch.float32),
        A.new_empty((*batch, k), dtype=torch.int32),
        A.new_empty(batch, dtype=torch.int32),
    )


def lu_vjp(P, L, U, gL, gU):
    """A = P L U (L m x k unit lower, U k x n upper, k = min(m, n)): the gradient of A from
    those of L (its strictly lower part) and U (its upper part), torch.linalg.lu's formula.
    Square: gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T. Wide, U = [U1 U2]: U2 adds
    -gU2 U2^T to L^T gL and gA = P L^-T [phi U1^-T | gU2]. Tall, L = [L1; L2]: L2 adds
    -L2^T gL2 to gU U^T and gA = P [L1^-T phi; gL2] U^-T."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m < n:
        U1, U2, gU1, gU2 = U[..., :k], U[..., k:], gU[..., :k], gU[..., k:]
        phi = (L.mT @ gL - gU2 @ U2.mT).tril(-1) + (gU1 @ U1.mT).triu()
        phi = torch.linalg.solve_triangular(U1.mT, phi, upper=False, left=False)
        phi = torch.cat([phi, gU2], dim=-1)
        phi = torch.linalg.solve_triangular(L.mT, phi, upper=True, unitriangular=True)
        return P @ phi
    L1, L2, gL1, gL2 = L[..., :k, :], L[..., k:, :], gL[..., :k, :], gL[..., k:, :]
    phi = (L1.mT @ gL1).tril(-1) + (gU @ U.mT - L2.mT @ gL2).triu()
    phi = torch.linalg.solve_triangular(L1.mT, phi, upper=True, unitriangular=True)
    phi = torch.cat([phi, gL2], dim=-2)
    phi = torch.linalg.solve_triangular(U.mT, phi, upper=False, left=False)
    return P @ phi


def lu_factor_vjp(LU, pivots, gLU):
    """lu_vjp with L and U packed in LU (and their gradients in gLU)."""
    P, L, U = torch.lu_unpack(LU, pivots)
    k = min(LU.shape[-2], LU.shape[-1])
    return lu_vjp(P, L, U, gLU[..., :, :k].tril(-1), gLU[..., :k, :].triu())


def _lu_setup(ctx, inputs, output):
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(output[0], output[1])


def _lu_backward(ctx, gLU, _gpivots, _ginfo):
    LU, pivots = ctx.saved_tensors
    return lu_factor_vjp(LU, pivots, gLU).to(ctx.dtype)


lu_factor_op.register_autograd(_lu_backward, setup_context=_lu_setup)
_vmap(lu_factor_op, 1, 3)


def _steps(like: torch.Tensor, first: int) -> torch.Tensor:
    """first, first + 1, ... along like's last dimension, in like's dtype and device; for a
    tensor subclass (a DTensor) with like's batch dimensions and placements, as elementwise ops
    with like need (a plain tensor cannot meet a DTensor there)."""
    n = like.shape[-1]
    if type(like) is torch.Tensor:
        return torch.arange(first, first + n, device=like.device, dtype=like.dtype)
    return torch.ones_like(like).cumsum(-1) + (first - 1)


def _lu_sign(pivots: torch.Tensor, dtype) -> torch.Tensor:
    """The sign (+-1) of the permutation of LAPACK's row interchanges: one transposition per
    pivot that is not its own row."""
    if pivots.is_cpu and _concrete(pivots) and not _functorch_wrapped(pivots):
        # Plain CPU pivots: through NumPy (the torch ops' 12 us for one small matrix; 3 here).
        p = pivots.numpy()
        odd = np.count_nonzero(p != np.arange(1, p.shape[-1] + 1, dtype=p.dtype), axis=-1) & 1
        return torch.from_numpy(np.asarray(1 - 2 * odd, dtype=np.float32)).to(dtype)
    steps = _steps(pivots, 1)
    swaps = (pivots != steps).sum(-1)
    return 1.0 - 2.0 * (swaps % 2).to(dtype)


def _det_from_lu(LU: torch.Tensor, pivots: torch.Tensor) -> torch.Tensor:
    return _lu_sign(pivots, LU.dtype) * LU.diagonal(dim1=-2, dim2=-1).prod(-1)


def _concrete(t: torch.Tensor) -> bool:
    """Whether t's values may steer Python: a plain eager tensor, not batched by vmap, not
    recorded by compile or jit.trace."""
    return (
        type(t) is torch.Tensor
        and not d.capturing()
        and not _under_vmap(t)
        and torch._C._len_torch_dispatch_stack() == 0
    )


def _prod_of_others(S: torch.Tensor) -> torch.Tensor:
    """prod_{j != i} S_j for each i, without division (exact with zeros in S)."""
    ones = S.new_ones((*S.shape[:-1], 1))
    before = torch.cat([ones, S[..., :-1]], -1).cumprod(-1)
    after = torch.cat([S[..., 1:], ones], -1).flip(-1).cumprod(-1).flip(-1)
    return before * after


def det_cofactor(A: torch.Tensor, det: torch.Tensor) -> torch.Tensor:
    """The matrix of cofactors adj(A)^T, det's gradient: det A^-T where det is a normal
    float and, elsewhere (an exactly singular matrix, a determinant that underflowed to 0 or a
    subnormal, or overflowed to inf), from the SVD A = U S V^T: det(U) det(V) U
    diag(prod_{j != i} s_j) V^T (adj(A) is a polynomial in A, nonzero where the rank is
    n - 1). Each branch sees a harmless stand-in (I; a diagonal of distinct values) for the
    matrices it does not serve, so neither its values nor its derivative (double backward)
    puts inf/NaN there. A NaN det (a NaN/Inf input) takes the first branch: NaN. In torch
    ops."""
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    small = det.abs() < torch.finfo(det.dtype).tiny
    singular = (small | torch.isinf(det))[..., None, None]
    C = torch.linalg.solve_ex(torch.where(singular, eye, A).mT, det[..., None, None] * eye).result
    if _concrete(det) and not bool(singular.any()):
        return C
    distinct = torch.diag_embed(torch.arange(1, n + 1, dtype=A.dtype, device=A.device))
    U, S, Vh = torch.linalg.svd(torch.where(singular, A, distinct))
    alpha = (torch.linalg.det(U) * torch.linalg.det(Vh))[..., None, None]
    return torch.where(singular, alpha * (U * _prod_of_others(S)[..., None, :]) @ Vh, C)


@torch.library.custom_op("metal_linalg::det", mutates_args=(), schema="(Tensor A) -> Tensor")
def det_op(A: torch.Tensor):
    _check_square(A, "det")
    d.check_no_tangent(A, "det")
    LU, pivots, _ = run("lu_factor", A, None, 0, False)
    return _det_from_lu(LU, pivots)


@det_op.register_fake
def _(A):
    _check_square(A, "det")
    return A.new_empty(A.shape[:-2], dtype=torch.float32)


def _det_setup(ctx, inputs, output):
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(d.to_float32(inputs[0]), output)


def _det_backward(ctx, g):
    A, det = ctx.saved_tensors
    return (g[..., None, None] * det_cofactor(A, det)).to(ctx.dtype)


det_op.register_autograd(_det_backward, setup_context=_det_setup)
_vmap(det_op, 1, 1)


# ---- autograd.Functions: the public functions' differentiable path outside eager, compile and
# tracing (backward and torch.func transforms over the custom ops; no jvp: forward-mode AD
# raises torch's NotImplementedError) ----


class _Cholesky(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A, upper):
        return torch.ops.metal_linalg.cholesky(A, upper)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.upper = inputs[1]
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[0])

    @staticmethod
    def backward(ctx, gL, _ginfo):
        (L,) = ctx.saved_tensors
        return cholesky_vjp(L, gL, ctx.upper), None


class _Solve(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A, B, left):
        return torch.ops.metal_linalg.solve(A, B, left)

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, B, ctx.left = inputs
        ctx.mark_non_differentiable(output[1])
        _save_rhs(ctx, A, B, output[0])

    @staticmethod
    def backward(ctx, gX, _ginfo):
        return _solve_backward(ctx, gX, None)


class _Inv(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A):
        return torch.ops.metal_linalg.inv(A)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[0])

    @staticmethod
    def backward(ctx, gX, _ginfo):
        (X,) = ctx.saved_tensors
        return -(X.mT @ gX @ X.mT)


class _SolveTriangular(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A, B, upper, left, unit):
        return torch.ops.metal_linalg.solve_triangular(A, B, upper, left, unit)

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, B, ctx.upper, ctx.left, ctx.unit = inputs
        _save_rhs(ctx, A, B, output)

    @staticmethod
    def backward(ctx, gX):
        return _triangular_backward(ctx, gX)


class _LuFactor(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A):
        return torch.ops.metal_linalg.lu_factor(A)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1], output[2])
        ctx.save_for_backward(output[0], output[1])

    @staticmethod
    def backward(ctx, gLU, _gpivots, _ginfo):
        LU, pivots = ctx.saved_tensors
        return lu_factor_vjp(LU, pivots, gLU)


class _Det(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(A):
        return torch.ops.metal_linalg.det(A)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)

    @staticmethod
    def backward(ctx, g):
        A, det = ctx.saved_tensors
        return g[..., None, None] * det_cofactor(A, det)


# ---- the public functions ----


def _direct(A, B=None) -> bool:
    """Plain eager tensors with no autograd: call the core directly (the op's own checks were
    made by the caller)."""
    return d.eager(A) if B is None else d.eager2(A, B)


def _bool(value, what: str, name: str) -> bool:
    if not isinstance(value, (bool, int)) or isinstance(value, int) and value not in (0, 1):
        raise TypeError(f"[metal_linalg.{name}] {what} must be a bool, got {value!r}")
    return bool(value)


def _cholesky(A, upper: bool, keep: bool = True):
    _check_square(A, "cholesky")
    upper = _bool(upper, "upper", "cholesky")
    A = d.to_float32(A)
    if _direct(A):
        return run("cholesky", A, None, ML_LS_UPPER if upper else 0, keep)
    if d.capturing():
        return torch.ops.metal_linalg.cholesky(A, upper)
    return _Cholesky.apply(A, upper)


def cholesky(A: torch.Tensor, *, upper: bool = False) -> torch.Tensor:
    """The Cholesky factor of symmetric positive-definite [..., N, N] (float32), like
    torch.linalg.cholesky: L with A = L L^T from A's lower triangle, or U with A = U^T U from
    its upper triangle (upper=True). Raises torch.linalg.LinAlgError naming the first matrix
    that is not positive definite (or has a NaN/Inf entry)."""
    L, info = _cholesky(A, upper, False)
    _cholesky_errors(info)
    return L


def cholesky_ex(
    A: torch.Tensor, *, upper: bool = False, check_errors: bool = False
) -> torch.return_types.linalg_cholesky_ex:
    """cholesky and the per-matrix info (module docstring); a failed matrix's L is all NaN."""
    L, info = _cholesky(A, upper)
    if check_errors:
        _cholesky_errors(info)
    return torch.return_types.linalg_cholesky_ex((L, info))


def _solve(A, B, left: bool, keep: bool = True):
    _check_square(A, "solve")
    _check_tensor(B, "solve", "B", min_dim=1)
    left = _bool(left, "left", "solve")
    # torch.linalg.solve's vector case: B of shape (n,) or A's shape without its last dim.
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    if vector:
        B = B.unsqueeze(-1)
    _check_rhs(A, B, left, "solve")
    A, B = d.to_float32(A), d.to_float32(B)
    if _direct(A, B):
        X, info = run("solve", A, B, 0 if left else ML_LS_RIGHT, keep)
    elif d.capturing():
        X, info = torch.ops.metal_linalg.solve(A, B, left)
    else:
        X, info = _Solve.apply(A, B, left)
    return (X.squeeze(-1) if vector else X), info


def solve(A: torch.Tensor, B: torch.Tensor, *, left: bool = True) -> torch.Tensor:
    """X with A X = B (left) or X A = B (left=False) for square [..., N, N] A, like
    torch.linalg.solve (LU with partial pivoting): batch dimensions broadcast, B [..., N] is a
    batch of vectors where torch says so. Raises torch.linalg.LinAlgError for an exactly
    singular matrix; a NaN/Inf entry gives a NaN result for that matrix only."""
    X, info = _solve(A, B, left, False)
    _solve_errors(info)
    return X


def solve_ex(
    A: torch.Tensor, B: torch.Tensor, *, left: bool = True, check_errors: bool = False
) -> torch.return_types.linalg_solve_ex:
    """solve and the per-matrix info (module docstring); a failed matrix's result is NaN."""
    X, info = _solve(A, B, left)
    if check_errors:
        _solve_errors(info)
    return torch.return_types.linalg_solve_ex((X, info))


def _inv(A, keep: bool = True):
    _check_square(A, "inv")
    A = d.to_float32(A)
    if _direct(A):
        return run("inv", A, None, 0, keep)
    if d.capturing():
        return torch.ops.metal_linalg.inv(A)
    return _Inv.apply(A)


def inv(A: torch.Tensor) -> torch.Tensor:
    """The inverse of square [..., N, N], like torch.linalg.inv (LU with partial pivoting).
    Raises torch.linalg.LinAlgError for an exactly singular matrix; a NaN/Inf entry gives a NaN
    inverse for that matrix only."""
    X, info = _inv(A, False)
    _inv_errors(info)
    return X


def inv_ex(A: torch.Tensor, *, check_errors: bool = False) -> torch.return_types.linalg_inv_ex:
    """inv and the per-matrix info (module docstring); a failed matrix's inverse is NaN."""
    X, info = _inv(A)
    if check_errors:
        _inv_errors(info)
    return torch.return_types.linalg_inv_ex((X, info))


def solve_triangular(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    upper: bool,
    left: bool = True,
    unitriangular: bool = False,
) -> torch.Tensor:
    """X with A X = B (left) or X A = B for triangular [..., N, N] A, like
    torch.linalg.solve_triangular: only A's upper (upper=True) or lower triangle is read, its
    diagonal taken as ones with unitriangular=True; B [..., N, K] (or [..., K, N] with
    left=False); batch dimensions broadcast. A zero on the diagonal, or a NaN/Inf entry, gives
    a NaN result for that matrix (torch gives inf/NaN there too)."""
    _check_square(A, "solve_triangular")
    _check_tensor(B, "solve_triangular", "B")
    upper = _bool(upper, "upper", "solve_triangular")
    left = _bool(left, "left", "solve_triangular")
    unit = _bool(unitriangular, "unitriangular", "solve_triangular")
    _check_rhs(A, B, left, "solve_triangular")
    A, B = d.to_float32(A), d.to_float32(B)
    if _direct(A, B):
        return run("solve_triangular", A, B, _triangular_flags(upper, left, unit), False)[0]
    if d.capturing():
        return torch.ops.metal_linalg.solve_triangular(A, B, upper, left, unit)
    return _SolveTriangular.apply(A, B, upper, left, unit)


def _lu_factor(A, pivot: bool, keep: bool = True):
    _check_tensor(A, "lu_factor")
    if not _bool(pivot, "pivot", "lu_factor"):
        raise NotImplementedError(
            "[metal_linalg.lu_factor] pivot=False (LU without pivoting) is not implemented "
            "(torch has it on CUDA only)"
        )
    A = d.to_float32(A)
    if _direct(A):
        return run("lu_factor", A, None, 0, keep)
    if d.capturing():
        return torch.ops.metal_linalg.lu_factor(A)
    return _LuFactor.apply(A)


def lu_factor(A: torch.Tensor, *, pivot: bool = True) -> torch.return_types.linalg_lu_factor:
    """A = P L U with partial pivoting for [..., M, N] (sgetrf), like torch.linalg.lu_factor:
    LU (L's unit diagonal not stored) and pivots (int32, LAPACK's 1-based row interchanges).
    Raises torch.linalg.LinAlgError with torch's message when U has an exact zero on its
    diagonal; a NaN/Inf entry gives a NaN LU (pivots 1..k) for that matrix only. Gradients for
    square A; pivot=False raises NotImplementedError."""
    LU, pivots, info = _lu_factor(A, pivot, False)
    _lu_factor_errors(info)
    return torch.return_types.linalg_lu_factor((LU, pivots))


def lu_factor_ex(
    A: torch.Tensor, *, pivot: bool = True, check_errors: bool = False
) -> torch.return_types.linalg_lu_factor_ex:
    """lu_factor and the per-matrix info (module docstring): a singular matrix keeps its
    factorization, info the first zero on U's diagonal (as torch)."""
    LU, pivots, info = _lu_factor(A, pivot)
    if check_errors:
        _lu_factor_errors(info)
    return torch.return_types.linalg_lu_factor_ex((LU, pivots, info))


def lu(A: torch.Tensor, *, pivot: bool = True) -> torch.return_types.linalg_lu:
    """A = P L U with partial pivoting for [..., M, N], like torch.linalg.lu: P [..., M, M]
    (float32), L [..., M, K] unit lower, U [..., K, N] upper, K = min(M, N). lu_factor's
    factorization unpacked (torch.lu_unpack), so it runs where lu_factor runs
    (lu_factor_backend). A singular matrix is no error (its U has a zero on the diagonal); a
    NaN/Inf entry gives NaN L and U (P the identity) for that matrix only. Gradients as
    torch's, for any shape (through lu_factor's); pivot=False raises NotImplementedError."""
    _check_tensor(A, "lu")
    if not _bool(pivot, "pivot", "lu"):
        raise NotImplementedError(
            "[metal_linalg.lu] pivot=False (LU without pivoting) is not implemented "
            "(torch has it on CUDA only)"
        )
    LU, pivots, _ = _lu_factor(A, True, False)
    return torch.return_types.linalg_lu(torch.lu_unpack(LU, pivots))


def _check_lu_solve(LU, pivots, B, left: bool) -> None:
    _check_tensor(LU, "lu_solve", "LU")
    if LU.shape[-1] != LU.shape[-2]:
        raise ValueError(
            f"[metal_linalg.lu_solve] LU must be batches of square matrices, got shape "
            f"{tuple(LU.shape)}"
        )
    if not isinstance(pivots, torch.Tensor):
        raise TypeError(
            f"[metal_linalg.lu_solve] expected a torch.Tensor for pivots, got "
            f"{type(pivots).__name__}"
        )
    if pivots.dtype != torch.int32:
        raise TypeError(
            f"[metal_linalg.lu_solve] pivots must be int32 (lu_factor's), got {pivots.dtype}"
        )
    if pivots.shape != LU.shape[:-1]:
        raise ValueError(
            f"[metal_linalg.lu_solve] pivots must have LU's shape without its last dimension "
            f"{tuple(LU.shape[:-1])}, got {tuple(pivots.shape)}"
        )
    if pivots.device != LU.device:
        raise ValueError(
            f"[metal_linalg.lu_solve] LU and pivots must be on the same device, got "
            f"{LU.device} and {pivots.device}"
        )
    _check_tensor(B, "lu_solve", "B")
    _check_rhs(LU, B, left, "lu_solve")


def _permutations(LU: torch.Tensor, pivots: torch.Tensor):
    """(perm, inv) of A = P L U from LAPACK's pivots: (P^T M)[i] = M[perm[i]] and
    (P M)[i] = M[inv[i]] (int64, LU's batch shape plus n)."""
    try:
        P = torch.lu_unpack(LU.detach(), pivots, unpack_data=False).P
    except RuntimeError as err:
        if "pivots" not in str(err):
            raise
        raise ValueError(
            f"[metal_linalg.lu_solve] pivots must be in [1, {LU.shape[-1]}] (lu_factor's)"
        ) from None
    # P's one 1 per row and column found by products with 0..n-1 (exact in float32 for
    # n < 2^24; faster than argmax over a dimension)
    if type(P) is torch.Tensor:
        steps = torch.arange(P.shape[-1], dtype=P.dtype, device=P.device)
        return (steps @ P).long(), (P @ steps).long()
    steps = _steps(P[..., :1, :], 0)  # [..., 1, n]: a DTensor keeps P's batch placements
    return (steps @ P).squeeze(-2).long(), (P @ steps.mT).squeeze(-1).long()


def _reorder(M: torch.Tensor, index: torch.Tensor, rows: bool) -> torch.Tensor:
    """M[..., index[i], :] (rows) or M[..., :, index[i]]: index has LU's batch shape plus n,
    M's batch dimensions broadcast with it."""
    batch = torch.broadcast_shapes(M.shape[:-2], index.shape[:-1])
    index = index[..., :, None] if rows else index[..., None, :]
    M = M.expand(*batch, *M.shape[-2:])
    index = index.expand(*batch, *index.shape[-2:])
    return torch.take_along_dim(M, index, dim=-2 if rows else -1)


def lu_solve(
    LU: torch.Tensor,
    pivots: torch.Tensor,
    B: torch.Tensor,
    *,
    left: bool = True,
    adjoint: bool = False,
) -> torch.Tensor:
    """X with A X = B (left), X A = B (left=False), or with A^T for A (adjoint=True), from
    A's LU factorization (lu_factor's LU [..., N, N] and int32 pivots [..., N]), like
    torch.linalg.lu_solve: B [..., N, K] (or [..., K, N] with left=False), batch dimensions
    of LU and B broadcast. Two solve_triangular calls (they run where solve_triangular runs:
    solve_triangular_backend) and the rows (or columns) permuted. A zero on U's diagonal or a
    NaN/Inf entry of LU gives NaN for that matrix. Gradients for LU and B as torch's (through
    solve_triangular's)."""
    left = _bool(left, "left", "lu_solve")
    adjoint = _bool(adjoint, "adjoint", "lu_solve")
    _check_lu_solve(LU, pivots, B, left)
    LU, B = d.to_float32(LU), d.to_float32(B)
    perm, inv = _permutations(LU, pivots)
    # U^T is lower, L^T unit upper; one copy for both solves (lu_factor's LU from torch is
    # column-major, and the core reads row-major)
    T = (LU.mT if adjoint else LU).contiguous()
    u_upper, l_upper = not adjoint, adjoint
    if left and not adjoint:  # U^-1 L^-1 P^T B
        X = _reorder(B, perm, rows=True)
    elif not left and adjoint:  # B P L^-T U^-T
        X = _reorder(B, perm, rows=False)
    else:
        X = B
    # A X = B: L first; A^T X = B: U^T first; X A = B: U first; X A^T = B: L^T first.
    l_first = left != adjoint
    for unit in (True, False) if l_first else (False, True):
        X = solve_triangular(
            T, X, upper=l_upper if unit else u_upper, left=left, unitriangular=unit
        )
    if left and adjoint:  # P L^-T U^-T B
        X = _reorder(X, inv, rows=True)
    elif not left and not adjoint:  # B U^-1 L^-1 P^T
        X = _reorder(X, inv, rows=False)
    return X


def _lu_diagonal_and_sign(A, name: str):
    """U's diagonal of A = P L U (lu_factor) and the permutation's sign, +-1."""
    _check_square(A, name)
    LU, pivots, _ = _lu_factor(A, True, False)
    if type(LU) is torch.Tensor:
        diag = LU.diagonal(dim1=-2, dim2=-1)
    else:  # a DTensor: its diagonal would be gathered, its flat view's strided slice is local
        diag = LU.flatten(-2)[..., :: LU.shape[-1] + 1]
    return diag, _lu_sign(pivots, diag.dtype)


def det(A: torch.Tensor) -> torch.Tensor:
    """The determinant of square [..., N, N] from its LU factorization (lu_factor: the product
    of U's diagonal and the permutation's sign; it runs where lu_factor runs,
    lu_factor_backend), like torch.linalg.det: 0 for an exactly singular matrix, NaN for one
    with a NaN/Inf entry. Gradient: the cofactor matrix (det_cofactor), det A^-T, and where det
    is 0 or not a normal float the adjugate from the SVD (nonzero at rank N - 1, which torch
    gives only under create_graph: its first-order gradient there is 0)."""
    _check_square(A, "det")
    A = d.to_float32(A)
    if _direct(A):
        LU, pivots, _ = run("lu_factor", A, None, 0, False)
        return _det_from_lu(LU, pivots)
    if d.capturing():
        return torch.ops.metal_linalg.det(A)
    return _Det.apply(A)


def slogdet(A: torch.Tensor) -> torch.return_types.linalg_slogdet:
    """(sign, log|det|) of square [..., N, N] from its LU factorization (it runs where
    lu_factor runs, lu_factor_backend), like torch.linalg.slogdet: (0, -inf) for an exactly
    singular matrix, (0, NaN) for one with a NaN/Inf entry, as torch. The gradient of
    logabsdet is A^-T (through lu_factor's), not finite at an exactly singular matrix, as
    torch's; sign has none."""
    diag, sign = _lu_diagonal_and_sign(A, "slogdet")
    sign = (sign * diag.sign().prod(-1)).detach()
    return torch.return_types.linalg_slogdet((sign, diag.abs().log().sum(-1)))
