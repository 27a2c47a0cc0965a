"""The external oracle: JAX computes each op (and its gradient) on fixed inputs; reference_test
runs the same op in lazycl on the host and on the OpenCL device and compares.

Usage: cases.py OUT. Writes a text file of cases, each

    case NAME OP
    attr KEY VALUE            (an int, a float, or a comma-separated list of ints; VALUE "-" is [])
    in NAME DTYPE RANK DIMS... VALUES...
    out DTYPE RANK DIMS... VALUES...         (one line per output, in order)
    ct DTYPE RANK DIMS... VALUES...          (the cotangent of each floating output)
    grad NAME DTYPE RANK DIMS... VALUES...   (d sum(out_i * ct_i) / d input NAME)
    tol RTOL ATOL             (|got - want| <= RTOL |want| + ATOL; "tol 0 0" is bit-exact)
    end

Floats are written with 9 significant digits, which round-trips float32 exactly (17 for
float64, which round-trips a double). OP is the
lazycl function's name; reference_test maps it (and the attrs) to the call.
"""

import os
import sys
import zlib

import jax

jax.config.update("jax_enable_x64", True)  # integer results stay int64, as lazycl's

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

CASES = []


def case(name, op, fn, inputs, attrs=None, grad=(), tol=(1e-5, 1e-6), outputs=None):
    """Registers a case: fn(*inputs) -> an array or a tuple of arrays."""
    CASES.append(dict(name=name, op=op, fn=fn, inputs=inputs, attrs=attrs or {}, grad=grad,
                      tol=tol))


def f32(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def f64(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float64)


BF16 = np.dtype(jnp.bfloat16)


def dtype_name(a):
    return {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
            np.dtype(np.bool_): "bool", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
            BF16: "bf16"}[np.asarray(a).dtype]


def tensor_line(tag, a, name=None):
    a = np.asarray(a)
    head = [tag] + ([name] if name is not None else []) + [dtype_name(a), str(a.ndim)]
    head += [str(d) for d in a.shape]
    if a.dtype == np.float32:
        vals = ["%.9g" % v for v in a.reshape(-1)]
    elif a.dtype == np.float64:
        vals = ["%.17g" % v for v in a.reshape(-1)]
    elif a.dtype in (np.float16, BF16):  # every 16-bit value is exactly a float32
        vals = ["%.9g" % v for v in a.astype(np.float32).reshape(-1)]
    else:
        vals = [str(int(v)) for v in a.reshape(-1)]
    return " ".join(head + vals)


def attr_text(v):
    if isinstance(v, (list, tuple)):
        return ",".join(str(int(x)) for x in v) if v else "-"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


def emit(c, out):
    rng = np.random.default_rng(zlib.crc32(c["name"].encode()))
    names = [n for n, _ in c["inputs"]]
    arrays = [np.asarray(a) for _, a in c["inputs"]]
    result = c["fn"](*[jnp.asarray(a) for a in arrays])
    results = list(result) if isinstance(result, tuple) else [result]
    results = [np.asarray(r) for r in results]
    lines = ["case %s %s" % (c["name"], c["op"])]
    for k, v in sorted(c["attrs"].items()):
        lines.append("attr %s %s" % (k, attr_text(v)))
    for n, a in zip(names, arrays):
        lines.append(tensor_line("in", a, n))
    wide = any(a.dtype == np.float64 for a in arrays)
    for r in results:
        if r.dtype == np.float64 and not wide:
            raise SystemExit("case %s: JAX gave float64; make the inputs float32" % c["name"])
        lines.append(tensor_line("out", r))
    if c["grad"]:
        floating = [i for i, r in enumerate(results) if r.dtype in (np.float32, np.float64)]
        cts = [rng.uniform(-1, 1, size=results[i].shape).astype(results[i].dtype)
               for i in floating]
        for ct in cts:
            lines.append(tensor_line("ct", ct))
        wrt = [names.index(n) for n in c["grad"]]

        def loss(*diff):
            args = [jnp.asarray(a) for a in arrays]
            for i, d in zip(wrt, diff):
                args[i] = d
            r = c["fn"](*args)
            r = list(r) if isinstance(r, tuple) else [r]
            return sum(jnp.sum(r[i] * ct) for i, ct in zip(floating, cts))

        grads = jax.grad(loss, argnums=tuple(range(len(wrt))))(
            *[jnp.asarray(arrays[i]) for i in wrt])
        for n, g, i in zip(c["grad"], grads, wrt):
            lines.append(tensor_line("grad", np.asarray(g, dtype=arrays[i].dtype), n))
    lines.append("tol %g %g" % c["tol"])
    lines.append("end")
    out.write("\n".join(lines) + "\n")


# ---- The cases. Shapes cover broadcasting, size-0 and size-1 dims. ----

def unary_cases():
    rng = np.random.default_rng(1)
    x = f32(rng, 3, 1, 5)
    pos = f32(rng, 4, 5, lo=0.1, hi=3.0)
    table = [("exp", jnp.exp, x), ("log", jnp.log, pos), ("sqrt", jnp.sqrt, pos),
             ("tanh", jnp.tanh, x), ("sigmoid", jax.nn.sigmoid, x), ("erf", jax.scipy.special.erf, x),
             ("abs", jnp.abs, x), ("sin", jnp.sin, x), ("cos", jnp.cos, x),
             ("relu", jax.nn.relu, x), ("neg", jnp.negative, x)]
    for op, fn, a in table:
        case(op, op, fn, [("x", a)], grad=("x",))
    case("exp_size0", "exp", jnp.exp, [("x", f32(rng, 2, 0, 3))], grad=("x",))
    case("tanh_scalar_shape", "tanh", jnp.tanh, [("x", f32(rng, 1))], grad=("x",))


def binary_cases():
    rng = np.random.default_rng(2)
    a = f32(rng, 4, 1, 3)
    b = f32(rng, 5, 1)
    bpos = f32(rng, 5, 1, lo=0.5, hi=2.0)
    for op, fn in [("add", jnp.add), ("sub", jnp.subtract), ("mul", jnp.multiply),
                   ("maximum", jnp.maximum), ("minimum", jnp.minimum)]:
        case(op + "_broadcast", op, fn, [("a", a), ("b", b)], grad=("a", "b"))
    case("div_broadcast", "div", jnp.divide, [("a", a), ("b", bpos)], grad=("a", "b"))
    case("pow_broadcast", "pow", jnp.power, [("a", f32(rng, 3, 4, lo=0.5, hi=2.0)),
                                             ("b", f32(rng, 4, lo=-1.5, hi=1.5))],
         grad=("a", "b"), tol=(2e-5, 1e-6))
    for op, fn in [("lt", jnp.less), ("le", jnp.less_equal), ("gt", jnp.greater),
                   ("ge", jnp.greater_equal), ("eq", jnp.equal), ("ne", jnp.not_equal)]:
        ints_a = rng.integers(-2, 3, size=(3, 4)).astype(np.int32)
        ints_b = rng.integers(-2, 3, size=(4,)).astype(np.int32)
        case(op + "_i32", op, fn, [("a", ints_a), ("b", ints_b)])
    cond = rng.integers(0, 2, size=(2, 1, 3)).astype(np.bool_)
    case("where_broadcast", "where", jnp.where,
         [("cond", cond), ("a", f32(rng, 4, 3)), ("b", f32(rng, 2, 4, 1))], grad=("a", "b"))
    case("add_i64_i32", "add", jnp.add, [("a", rng.integers(-9, 9, (3, 2)).astype(np.int64)),
                                         ("b", rng.integers(-9, 9, (2,)).astype(np.int32))])


def reduction_cases():
    rng = np.random.default_rng(3)
    x = f32(rng, 3, 4, 5)
    for keep in (False, True):
        k = "_keep" if keep else ""
        case("sum_dims02" + k, "sum", lambda t, keep=keep: jnp.sum(t, axis=(0, 2), keepdims=keep),
             [("x", x)], attrs=dict(dims=[0, 2], keepdim=keep), grad=("x",))
        case("mean_dim1" + k, "mean", lambda t, keep=keep: jnp.mean(t, axis=1, keepdims=keep),
             [("x", x)], attrs=dict(dims=[1], keepdim=keep), grad=("x",))
        case("max_dim2" + k, "max", lambda t, keep=keep: jnp.max(t, axis=2, keepdims=keep),
             [("x", x)], attrs=dict(dims=[2], keepdim=keep), grad=("x",))
    case("sum_all", "sum", jnp.sum, [("x", x)], attrs=dict(dims=[], keepdim=False), grad=("x",))
    case("sum_size0", "sum", lambda t: jnp.sum(t, axis=1), [("x", f32(rng, 3, 0))],
         attrs=dict(dims=[1], keepdim=False), grad=("x",))
    case("sum_i32", "sum", lambda t: jnp.sum(t.astype(jnp.int64), axis=0),
         [("x", rng.integers(-5, 5, (6, 3)).astype(np.int32))], attrs=dict(dims=[0], keepdim=False))
    case("softmax_last", "softmax", lambda t: jax.nn.softmax(t, axis=-1), [("x", f32(rng, 4, 7))],
         attrs=dict(dim=-1), grad=("x",))
    case("softmax_dim0", "softmax", lambda t: jax.nn.softmax(t, axis=0),
         [("x", f32(rng, 5, 3, lo=-30, hi=30))], attrs=dict(dim=0), grad=("x",))
    case("log_softmax_last", "log_softmax", lambda t: jax.nn.log_softmax(t, axis=-1),
         [("x", f32(rng, 3, 9, lo=-20, hi=20))], attrs=dict(dim=-1), grad=("x",))


def matmul_cases():
    rng = np.random.default_rng(4)
    case("matmul_2d", "matmul", jnp.matmul, [("a", f32(rng, 7, 13)), ("b", f32(rng, 13, 5))],
         grad=("a", "b"), tol=(1e-5, 1e-5))
    case("matmul_batched_broadcast", "matmul", jnp.matmul,
         [("a", f32(rng, 2, 1, 3, 4)), ("b", f32(rng, 3, 4, 6))], grad=("a", "b"),
         tol=(1e-5, 1e-5))
    case("matmul_k1", "matmul", jnp.matmul, [("a", f32(rng, 5, 1)), ("b", f32(rng, 1, 3))],
         grad=("a", "b"))
    case("matmul_m0", "matmul", jnp.matmul, [("a", f32(rng, 0, 4)), ("b", f32(rng, 4, 3))],
         grad=("a", "b"))
    case("matmul_k0", "matmul", jnp.matmul, [("a", f32(rng, 2, 0)), ("b", f32(rng, 0, 3))],
         grad=("a", "b"))
    case("matmul_i32", "matmul", jnp.matmul,
         [("a", rng.integers(-4, 4, (3, 5)).astype(np.int32)),
          ("b", rng.integers(-4, 4, (5, 2)).astype(np.int32))])


def view_cases():
    rng = np.random.default_rng(5)
    x = f32(rng, 2, 3, 4)
    case("transpose_exp", "transpose_exp", lambda t: jnp.exp(jnp.swapaxes(t, 0, 2)), [("x", x)],
         attrs=dict(dim0=0, dim1=2), grad=("x",))
    case("cat_dim1", "cat", lambda a, b: jnp.concatenate([a, b], axis=1),
         [("a", x), ("b", f32(rng, 2, 2, 4))], attrs=dict(dim=1), grad=("a", "b"))
    case("cat_negzero", "cat", lambda a, b: jnp.concatenate([a, b], axis=0),
         [("a", np.array([-0.0, 1.0], np.float32)), ("b", np.array([-0.0], np.float32))],
         attrs=dict(dim=0), tol=(0, 0))
    case("slice_dim2", "slice", lambda t: t[:, :, 1:3], [("x", x)],
         attrs=dict(dim=2, start=1, end=3), grad=("x",))


def _scatter_add(x, dim, index, src):
    # torch.scatter_add: out[.., index[i,j,k], ..] += src[i,j,k] along dim.
    idx = list(jnp.meshgrid(*[jnp.arange(n) for n in index.shape], indexing="ij"))
    idx[dim] = index
    return x.at[tuple(idx)].add(src)


def indexing_cases():
    rng = np.random.default_rng(6)
    x = f32(rng, 4, 5, 3)
    idx1 = rng.integers(0, 5, size=(4, 2, 3)).astype(np.int64)
    case("gather_dim1", "gather", lambda t, i: jnp.take_along_axis(t, i, axis=1),
         [("x", x), ("index", idx1)], attrs=dict(dim=1), grad=("x",))
    idx0 = rng.integers(0, 4, size=(6, 5, 3)).astype(np.int32)
    case("gather_dim0_i32_repeats", "gather", lambda t, i: jnp.take_along_axis(t, i, axis=0),
         [("x", x), ("index", idx0)], attrs=dict(dim=0), grad=("x",))
    big = np.array([[0, 7], [9, 1]], np.int64)  # 7 and 9 are past the end: clamped (JAX's clip)
    case("gather_clamps_past_the_end", "gather",
         lambda t, i: jnp.take_along_axis(t, i, axis=1, mode="clip"),
         [("x", f32(rng, 2, 3)), ("index", big)], attrs=dict(dim=1), grad=("x",))
    ids = np.array([3, 0, 3, 1], np.int64)
    case("index_select_dim0", "index_select", lambda t, i: jnp.take(t, i, axis=0),
         [("x", x), ("ids", ids)], attrs=dict(dim=0), grad=("x",))
    case("index_select_dim2", "index_select", lambda t, i: jnp.take(t, i, axis=2),
         [("x", x), ("ids", np.array([2, 2, 0], np.int32))], attrs=dict(dim=2), grad=("x",))
    case("index_select_empty", "index_select", lambda t, i: jnp.take(t, i, axis=1),
         [("x", x), ("ids", np.zeros((0,), np.int64))], attrs=dict(dim=1), grad=("x",))
    sidx = rng.integers(0, 4, size=(6, 5)).astype(np.int64)
    case("scatter_add_dim0_repeats", "scatter_add", lambda t, i, u: _scatter_add(t, 0, i, u),
         [("x", f32(rng, 4, 5)), ("index", sidx), ("src", f32(rng, 6, 5))],
         attrs=dict(dim=0), grad=("x", "src"))
    case("scatter_add_dim1", "scatter_add", lambda t, i, u: _scatter_add(t, 1, i, u),
         [("x", f32(rng, 3, 4)), ("index", rng.integers(0, 4, size=(3, 6)).astype(np.int32)),
          ("src", f32(rng, 3, 6))], attrs=dict(dim=1), grad=("x", "src"))
    table = f32(rng, 10, 4)
    tok = rng.integers(0, 10, size=(3, 5)).astype(np.int64)
    case("embedding", "embedding", lambda w, i: jnp.take(w, i, axis=0),
         [("weight", table), ("ids", tok)], grad=("weight",))
    case("embedding_i32_repeats", "embedding", lambda w, i: jnp.take(w, i, axis=0),
         [("weight", table), ("ids", np.array([1, 1, 1, 9], np.int32))], grad=("weight",))
    case("one_hot", "one_hot", lambda i: jax.nn.one_hot(i, 6, dtype=jnp.int64),
         [("ids", rng.integers(0, 6, size=(2, 3)).astype(np.int64))], attrs=dict(classes=6))



def _log_softmax_pick(logits, labels, ignore):
    log_p = jax.nn.log_softmax(logits, axis=1)
    keep = labels != ignore
    safe = jnp.where(keep, labels, 0)
    picked = jnp.squeeze(jnp.take_along_axis(log_p, jnp.expand_dims(safe, 1), axis=1), 1)
    return -jnp.sum(picked * keep) / jnp.sum(keep)


def _attention(q, k, v, causal, scale):
    s = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * scale
    if causal:
        l, n = q.shape[-2], k.shape[-2]
        s = jnp.where(jnp.arange(n)[None, :] <= jnp.arange(l)[:, None], s, -jnp.inf)
    return jnp.matmul(jax.nn.softmax(s, axis=-1), v)


def nn_cases():
    rng = np.random.default_rng(7)
    x = f32(rng, 2, 3, 8)
    w = f32(rng, 5, 8)
    b = f32(rng, 5)
    case("linear", "linear", lambda t, ww, bb: jnp.matmul(t, ww.T) + bb,
         [("x", x), ("weight", w), ("bias", b)], grad=("x", "weight", "bias"))
    g = f32(rng, 8, lo=0.5, hi=1.5)
    case("rms_norm", "rms_norm",
         lambda t, ww: t * jax.lax.rsqrt(jnp.mean(t * t, -1, keepdims=True) + 1e-6) * ww,
         [("x", x), ("weight", g)], attrs=dict(eps=1e-6), grad=("x", "weight"))
    beta = f32(rng, 8)

    def layer_norm(t, ww, bb):
        c = t - jnp.mean(t, -1, keepdims=True)
        return c * jax.lax.rsqrt(jnp.mean(c * c, -1, keepdims=True) + 1e-5) * ww + bb

    case("layer_norm", "layer_norm", layer_norm, [("x", x), ("weight", g), ("bias", beta)],
         attrs=dict(eps=1e-5), grad=("x", "weight", "bias"))
    logits = f32(rng, 6, 7, lo=-4, hi=4)
    labels = np.array([3, -100, 0, 6, 6, 2], np.int64)
    case("cross_entropy_ignore_index", "cross_entropy",
         lambda z, y: _log_softmax_pick(z, y, -100), [("logits", logits), ("labels", labels)],
         attrs=dict(ignore_index=-100), grad=("logits",))
    logits3 = f32(rng, 2, 4, 3, lo=-3, hi=3)
    labels3 = rng.integers(0, 4, size=(2, 3)).astype(np.int32)
    labels3[1, 2] = 1
    case("cross_entropy_spatial_i32", "cross_entropy",
         lambda z, y: _log_softmax_pick(z, y, 1), [("logits", logits3), ("labels", labels3)],
         attrs=dict(ignore_index=1), grad=("logits",))
    q = f32(rng, 2, 3, 5, 4)
    k = f32(rng, 2, 3, 6, 4)
    v = f32(rng, 2, 3, 6, 2)
    for causal in (False, True):
        case("sdpa" + ("_causal" if causal else ""), "scaled_dot_product_attention",
             lambda a, bb, c, causal=causal: _attention(a, bb, c, causal, 0.5),
             [("q", q), ("k", k), ("v", v)], attrs=dict(causal=causal, scale=0.5),
             grad=("q", "k", "v"), tol=(2e-5, 2e-6))
    case("sdpa_default_scale_square", "scaled_dot_product_attention",
         lambda a, bb, c: _attention(a, bb, c, True, 0.5),  # 1 / sqrt(E = 4)
         [("q", f32(rng, 3, 6, 4)), ("k", f32(rng, 3, 6, 4)), ("v", f32(rng, 3, 6, 3))],
         attrs=dict(causal=True), grad=("q", "k", "v"), tol=(2e-5, 2e-6))



def mathops_cases():
    rng = np.random.default_rng(8)
    x = f32(rng, 3, 1, 5, lo=-3, hi=3)
    pos = f32(rng, 2, 6, lo=0.2, hi=4)
    case("rsqrt", "rsqrt", jax.lax.rsqrt, [("x", pos)], grad=("x",))
    case("silu", "silu", jax.nn.silu, [("x", x)], grad=("x",))
    case("gelu_erf", "gelu", lambda t: jax.nn.gelu(t, approximate=False), [("x", x)],
         attrs=dict(approximate_tanh=False), grad=("x",))
    case("gelu_tanh", "gelu", lambda t: jax.nn.gelu(t, approximate=True), [("x", x)],
         attrs=dict(approximate_tanh=True), grad=("x",))
    case("clamp", "clamp", lambda t: jnp.clip(t, -1.0, 0.5), [("x", x)],
         attrs=dict(lo=-1.0, hi=0.5), grad=("x",))
    m = f32(rng, 2, 4, 5)
    for k in (0, 1, -2):
        case("tril_k%d" % k, "tril", lambda t, k=k: jnp.tril(t, k), [("x", m)], attrs=dict(k=k),
             grad=("x",))
        case("triu_k%d" % k, "triu", lambda t, k=k: jnp.triu(t, k), [("x", m)], attrs=dict(k=k),
             grad=("x",))
    r = f32(rng, 3, 4, 5)
    case("min_dim1", "min", lambda t: jnp.min(t, axis=1), [("x", r)],
         attrs=dict(dims=[1], keepdim=False), grad=("x",))
    case("prod_dim2_keep", "prod", lambda t: jnp.prod(t, axis=2, keepdims=True),
         [("x", f32(rng, 3, 4, 5, lo=0.5, hi=1.5))], attrs=dict(dims=[2], keepdim=True),
         grad=("x",), tol=(2e-5, 1e-6))
    case("prod_i32", "prod", lambda t: jnp.prod(t.astype(jnp.int64), axis=0),
         [("x", rng.integers(-3, 4, (4, 3)).astype(np.int32))], attrs=dict(dims=[0], keepdim=False))
    ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, 7, 7]], np.float32)
    case("argmax_ties", "argmax", lambda t: jnp.argmax(t, axis=1), [("x", ties)],
         attrs=dict(dim=1, keepdim=False))
    case("argmin_ties_keep", "argmin", lambda t: jnp.argmin(t, axis=0, keepdims=True),
         [("x", ties)], attrs=dict(dim=0, keepdim=True))
    case("argmax_i32", "argmax", lambda t: jnp.argmax(t, axis=-1),
         [("x", rng.integers(-3, 3, (4, 6)).astype(np.int32))], attrs=dict(dim=-1, keepdim=False))
    case("cumsum_dim1", "cumsum", lambda t: jnp.cumsum(t, axis=1), [("x", r)], attrs=dict(dim=1),
         grad=("x",))
    case("cumsum_i32", "cumsum", lambda t: jnp.cumsum(t.astype(jnp.int64), axis=0),
         [("x", rng.integers(-9, 9, (5, 2)).astype(np.int32))], attrs=dict(dim=0))
    vals = f32(rng, 3, 7)
    vals[1, 2] = vals[1, 5]  # a tie: the lower index first
    def topk(t):
        v, i = jax.lax.top_k(t, 3)
        return v, i.astype(jnp.int64)  # lazycl's indices are i64, as PyTorch's

    case("topk3", "topk", topk, [("x", vals)], attrs=dict(k=3, dim=-1), grad=("x",))
    case("gt_scalar", "gt_scalar", lambda t: t > 0.25, [("x", x)], attrs=dict(value=0.25))


def f64_cases():
    """Double precision: the same ops on float64 inputs, compared within 1e-12 (the device's
    libm and XLA's differ by an ulp or two)."""
    rng = np.random.default_rng(9)
    x = f64(rng, 3, 1, 5)
    pos = f64(rng, 4, 5, lo=0.1, hi=3.0)
    tol = (1e-12, 1e-14)
    for op, fn, a in [("exp", jnp.exp, x), ("log", jnp.log, pos), ("sqrt", jnp.sqrt, pos),
                      ("tanh", jnp.tanh, x), ("sigmoid", jax.nn.sigmoid, x),
                      ("erf", jax.scipy.special.erf, x), ("sin", jnp.sin, x),
                      ("cos", jnp.cos, x), ("silu", jax.nn.silu, x), ("rsqrt", jax.lax.rsqrt, pos)]:
        case(op + "_f64", op, fn, [("x", a)], grad=("x",), tol=tol)
    case("gelu_f64", "gelu", lambda t: jax.nn.gelu(t, approximate=False), [("x", x)],
         attrs=dict(approximate_tanh=False), grad=("x",), tol=tol)
    case("gelu_tanh_f64", "gelu", lambda t: jax.nn.gelu(t, approximate=True), [("x", x)],
         attrs=dict(approximate_tanh=True), grad=("x",), tol=tol)
    a, b = f64(rng, 4, 1, 3), f64(rng, 5, 1, lo=0.5, hi=2.0)
    case("div_f64", "div", jnp.divide, [("a", a), ("b", b)], grad=("a", "b"), tol=tol)
    case("pow_f64", "pow", jnp.power, [("a", f64(rng, 3, 4, lo=0.5, hi=2.0)),
                                       ("b", f64(rng, 4, lo=-1.5, hi=1.5))],
         grad=("a", "b"), tol=tol)
    case("add_f64_f32", "add", jnp.add, [("a", a), ("b", f32(rng, 5, 1))], grad=("a",), tol=tol)
    r = f64(rng, 3, 4, 5)
    case("sum_f64", "sum", lambda t: jnp.sum(t, axis=(0, 2)), [("x", r)],
         attrs=dict(dims=[0, 2], keepdim=False), grad=("x",), tol=tol)
    case("max_f64", "max", lambda t: jnp.max(t, axis=1, keepdims=True), [("x", r)],
         attrs=dict(dims=[1], keepdim=True), grad=("x",), tol=tol)
    case("prod_f64", "prod", lambda t: jnp.prod(t, axis=2), [("x", r)],
         attrs=dict(dims=[2], keepdim=False), grad=("x",), tol=tol)
    case("cumsum_f64", "cumsum", lambda t: jnp.cumsum(t, axis=1), [("x", r)], attrs=dict(dim=1),
         grad=("x",), tol=tol)
    case("softmax_f64", "softmax", lambda t: jax.nn.softmax(t, axis=-1), [("x", f64(rng, 4, 7))],
         attrs=dict(dim=-1), grad=("x",), tol=tol)
    case("log_softmax_f64", "log_softmax", lambda t: jax.nn.log_softmax(t, axis=-1),
         [("x", f64(rng, 4, 7))], attrs=dict(dim=-1), grad=("x",), tol=tol)
    case("matmul_f64", "matmul", jnp.matmul, [("a", f64(rng, 7, 13)), ("b", f64(rng, 13, 5))],
         grad=("a", "b"), tol=tol)
    case("matmul_batched_f64", "matmul", jnp.matmul,
         [("a", f64(rng, 2, 1, 4, 6)), ("b", f64(rng, 3, 6, 2))], grad=("a", "b"), tol=tol)
    ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, 7, 7]], np.float64)
    case("argmax_f64", "argmax", lambda t: jnp.argmax(t, axis=1), [("x", ties)],
         attrs=dict(dim=1, keepdim=False))
    case("exp_f64_size0", "exp", jnp.exp, [("x", f64(rng, 2, 0, 3))], grad=("x",), tol=tol)


def half_cases():
    """f16 and bf16: the conversions from f32 bit for bit (ties to even, subnormals, overflow to
    infinity), and ops computed in f32 and rounded once, as XLA does."""
    specials = np.array([0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 1e-8, 6e-8, 3e38, np.inf, -np.inf,
                         1.00390625, 1.01171875, 1.0039063692092896, 2.9802322387695312e-08,
                         6.103515625e-05, 3.0517578125e-05, -7.0e-06, 0.1, 1.0 / 3.0],
                        np.float32)
    rng = np.random.default_rng(10)
    wide = (rng.uniform(-1000, 1000, 200) * 10.0 ** rng.integers(-6, 3, 200)).astype(np.float32)
    x = np.concatenate([specials, wide])
    for name, dt in (("bf16", jnp.bfloat16), ("f16", jnp.float16)):
        case("cast_to_" + name, "cast_" + name, lambda t, dt=dt: t.astype(dt), [("x", x)],
             tol=(0, 0))
        a = f32(rng, 4, 5).astype(dt)
        b = f32(rng, 5).astype(dt)
        ulp = 2.0 ** -7 if name == "bf16" else 2.0 ** -10
        for op, fn in (("add", jnp.add), ("mul", jnp.multiply)):
            case(op + "_" + name, op, fn, [("a", a), ("b", b)], tol=(0, 0))
        case("exp_" + name, "exp", jnp.exp, [("x", a)], tol=(ulp, 0))
        case("tanh_" + name, "tanh", jnp.tanh, [("x", a)], tol=(ulp, 0))
        case("sum_" + name, "sum", lambda t: jnp.sum(t, axis=1), [("x", a)],
             attrs=dict(dims=[1], keepdim=False), tol=(ulp, 0))
        case("matmul_" + name, "matmul", jnp.matmul,
             [("a", a), ("b", f32(rng, 5, 3).astype(dt))], tol=(ulp, 1e-6))


unary_cases()
binary_cases()
reduction_cases()
matmul_cases()
view_cases()
indexing_cases()
nn_cases()
mathops_cases()
f64_cases()
half_cases()

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: cases.py OUT")
    with open(sys.argv[1] + ".tmp", "w") as f:
        for c in CASES:
            emit(c, f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    print("reference: %d cases from JAX %s written to %s" % (len(CASES), jax.__version__,
                                                              sys.argv[1]))
