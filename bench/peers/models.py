#!/usr/bin/env python3
"""The rows of `lazycl-bench models`, computed in JAX (jit, inputs already on the device,
block_until_ready) and, for the matmul rows, numpy (OpenBLAS). Medians after warm-up; the JSON
has the schema of lazycl-bench models --json (one file per side: "side" is "jax" or "numpy").

usage: models.py [--json-jax FILE] [--json-numpy FILE] [--repeat N] [--only PREFIX]
"""
import argparse
import json
import os
import statistics
import sys
import time

LAYERS, HIDDEN, BATCH, LR = 8, 1024, 256, 1e-3


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    out = [x for x in ("avx", "avx2", "fma", "avx512f", "avx512vl", "neon", "asimd")
                           if x in have]
                    return " ".join(out) or "none"
    except OSError:
        pass
    return "?"


# The char-LM sampling step's FFN products ([64, 128] x [128, 352]) are timed per call over
# SMALL_CALLS calls, as bench/models.cpp does.
SMALL_CALLS = 50
SMALL_FLOPS = 2.0 * 64 * 128 * 352


def median_ms(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def row(name, ms, flops=None):
    if flops is None:
        return {"name": name, "value": ms, "unit": "ms", "ms": ms, "kernels": -1}
    return {"name": name, "value": flops / ms / 1e6, "unit": "GFLOP/s", "ms": ms, "kernels": -1}


def print_row(side, r):
    print(f"  {side:6s} {r['name']:22s} {r['value']:10.4g} {r['unit']:8s} {r['ms']:10.4g}",
          flush=True)


def jax_rows(repeat, wanted):
    import jax
    import jax.numpy as jnp

    rows = []
    key = jax.random.PRNGKey(0)

    def randn(shape, seed, scale=1.0):
        x = jax.random.normal(jax.random.fold_in(key, seed), shape, jnp.float32) * scale
        return jax.block_until_ready(x)

    def add(r):
        print_row("jax", r)
        rows.append(r)

    if wanted("mlp"):
        w = [randn((HIDDEN, HIDDEN), 10 + l, 1 / 32) for l in range(LAYERS)]
        b = [randn((HIDDEN,), 20 + l, 0.1) for l in range(LAYERS)]
        x = randn((BATCH, HIDDEN), 30)
        target = randn((BATCH, HIDDEN), 31)

        def forward(params, x):
            h = x
            for wl, bl in zip(params[0], params[1]):
                h = jax.nn.relu(h @ wl + bl)
            return h

        def loss_fn(params, x, target):
            d = forward(params, x) - target
            return jnp.mean(d * d)

        @jax.jit
        def train_step(params, x, target):
            loss, g = jax.value_and_grad(loss_fn)(params, x, target)
            new = jax.tree_util.tree_map(lambda p, gp: p - LR * gp, params, g)
            return new, loss

        infer = jax.jit(forward)
        state = {"params": (w, b)}
        if wanted("mlp_train_step_ms"):
            def step():
                state["params"], loss = train_step(state["params"], x, target)
                jax.block_until_ready((state["params"], loss))
            add(row("mlp_train_step_ms", median_ms(step, 2, repeat)))
        if wanted("mlp_infer_ms"):
            p = state["params"]
            add(row("mlp_infer_ms",
                    median_ms(lambda: infer(p, x).block_until_ready(), 2, repeat)))

    if wanted("charlm"):
        charlm_rows(add, repeat, wanted)

    if wanted("scalar_read_ms"):
        # A training loop's loss.item(): the jitted sum of x * s (x [64, 64], s a new Python
        # float at every call) and its value read back to the host, per read over 100 reads.
        xs = randn((64, 64), 40)
        f = jax.jit(lambda x, s: jnp.sum(x * s))
        calls = [0]

        def reads():
            for _ in range(100):
                calls[0] += 1
                float(f(xs, float(calls[0] % 7)))
        add(row("scalar_read_ms", median_ms(reads, 2, repeat) / 100))

    mm = jax.jit(lambda a, b: a @ b)
    tn = jax.jit(lambda a, b: a.T @ b)
    nt = jax.jit(lambda a, b: a @ b.T)
    for n in (1024, 2048):
        a, c = randn((n, n), 5), randn((n, n), 6)
        flops = 2.0 * n ** 3
        for name, f in (("matmul_nn", mm), ("matmul_tn", tn), ("matmul_nt", nt)):
            name = f"{name}_{n}"
            if wanted(name):
                add(row(name, median_ms(lambda: f(a, c).block_until_ready(), 2, repeat), flops))
    if wanted("bmm"):
        q, kt = randn((128, 64, 32), 40), randn((128, 32, 64), 41)
        p, v = randn((128, 64, 64), 42), randn((128, 64, 32), 43)
        bmm = jax.jit(jnp.matmul)
        if wanted("bmm_qk"):
            add(row("bmm_qk", median_ms(lambda: bmm(q, kt).block_until_ready(), 2, repeat),
                    2.0 * 128 * 64 * 64 * 32))
        if wanted("bmm_pv"):
            add(row("bmm_pv", median_ms(lambda: bmm(p, v).block_until_ready(), 2, repeat),
                    2.0 * 128 * 64 * 32 * 64))
    if wanted("matmul_small") or wanted("swiglu_small"):
        y = randn((64, 128), 44)
        w1, w3 = randn((128, 352), 45, 1.0 / 16), randn((128, 352), 46, 1.0 / 16)
        swiglu = jax.jit(lambda y, w1, w3: jax.nn.silu(y @ w1) * (y @ w3))

        def calls(fn):
            def run():
                for _ in range(SMALL_CALLS):
                    fn().block_until_ready()
            return median_ms(run, 2, repeat) / SMALL_CALLS
        if wanted("matmul_small"):
            add(row("matmul_small", calls(lambda: mm(y, w1)), SMALL_FLOPS))
        if wanted("swiglu_small"):
            add(row("swiglu_small", calls(lambda: swiglu(y, w1, w3)), 2 * SMALL_FLOPS))
    return rows, f"jax {jax.__version__} on {jax.devices()[0]}"


def charlm_rows(add, repeat, wanted):
    """examples/char_lm.cpp's model and step: a training step (forward, backward, AdamW) on a
    [16, 64] batch, and one sampling step (the logits of a [1, 64] window, argmax of the last)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import llama_jax

    c = llama_jax.Config(vocab=256, dim=128, layers=4, heads=4, kv_heads=2, ffn=352, seq=64)
    rng = np.random.default_rng(0)
    params = [jnp.asarray((0.02 * rng.standard_normal(s)).astype(np.float32))
              for s in c.shapes()]
    ids = jnp.asarray(rng.integers(0, 256, size=(16, 64)).astype(np.int32))
    targets = jnp.asarray(rng.integers(0, 256, size=(16, 64)).astype(np.int32))

    @jax.jit
    def train_step(p, m, v, c1, c2, ids, targets):
        loss, g = jax.value_and_grad(lambda p: llama_jax.loss_fn(c, p, ids, targets))(p)
        p, m, v = llama_jax.adamw(p, g, m, v, c1, c2, 3e-3, 0.9, 0.99, 1e-8, 0.1)
        return p, m, v, loss

    state = {"p": params, "m": [jnp.zeros_like(x) for x in params],
             "v": [jnp.zeros_like(x) for x in params], "t": 0}
    if wanted("charlm_train_step_ms"):
        def step():
            state["t"] += 1
            c1, c2 = llama_jax.bias_corrections(state["t"], 0.9, 0.99)
            state["p"], state["m"], state["v"], loss = train_step(
                state["p"], state["m"], state["v"], c1, c2, ids, targets)
            jax.block_until_ready((state["p"], loss))
        add(row("charlm_train_step_ms", median_ms(step, 2, repeat)))
    if wanted("charlm_sample_token_ms"):
        sample = jax.jit(lambda p, w: jnp.argmax(llama_jax.forward(c, p, w)[0, -1]))
        window = ids[:1]
        add(row("charlm_sample_token_ms",
                median_ms(lambda: int(sample(state["p"], window)), 2, repeat)))
    if wanted("charlm_sample_for_loop_token_ms"):
        # lazycl's for-loop form of the same step; JAX's is its one jitted step again.
        sample = jax.jit(lambda p, w: jnp.argmax(llama_jax.forward(c, p, w)[0, -1]))
        window = ids[:1]
        add(row("charlm_sample_for_loop_token_ms",
                median_ms(lambda: int(sample(state["p"], window)), 2, repeat)))
    if wanted("charlm_sample_traced_token_ms"):
        # lazycl's traced form of the same step; jit is JAX's only form, timed again here.
        sample = jax.jit(lambda p, w: jnp.argmax(llama_jax.forward(c, p, w)[0, -1]))
        window = ids[:1]
        add(row("charlm_sample_traced_token_ms",
                median_ms(lambda: int(sample(state["p"], window)), 2, repeat)))


def numpy_rows(repeat, wanted):
    import numpy as np

    rows = []
    rng = np.random.default_rng(0)

    def add(r):
        print_row("numpy", r)
        rows.append(r)

    for n in (1024, 2048):
        a = rng.standard_normal((n, n), dtype=np.float32)
        c = rng.standard_normal((n, n), dtype=np.float32)
        flops = 2.0 * n ** 3
        for name, f in (("matmul_nn", lambda: a @ c), ("matmul_tn", lambda: a.T @ c),
                        ("matmul_nt", lambda: a @ c.T)):
            name = f"{name}_{n}"
            if wanted(name):
                add(row(name, median_ms(f, 2, repeat), flops))
    if wanted("bmm"):
        q = rng.standard_normal((128, 64, 32), dtype=np.float32)
        kt = rng.standard_normal((128, 32, 64), dtype=np.float32)
        p = rng.standard_normal((128, 64, 64), dtype=np.float32)
        v = rng.standard_normal((128, 64, 32), dtype=np.float32)
        if wanted("bmm_qk"):
            add(row("bmm_qk", median_ms(lambda: q @ kt, 2, repeat), 2.0 * 128 * 64 * 64 * 32))
        if wanted("bmm_pv"):
            add(row("bmm_pv", median_ms(lambda: p @ v, 2, repeat), 2.0 * 128 * 64 * 32 * 64))
    if wanted("matmul_small"):
        y = rng.standard_normal((64, 128), dtype=np.float32)
        w1 = rng.standard_normal((128, 352), dtype=np.float32)

        def calls():
            for _ in range(SMALL_CALLS):
                y @ w1
        add(row("matmul_small", median_ms(calls, 2, repeat) / SMALL_CALLS, SMALL_FLOPS))
    return rows, f"numpy {np.__version__}"


def write(path, side, device, repeat, rows):
    with open(path, "w") as f:
        json.dump({"side": side, "device": device, "cpu_flags": cpu_flags(), "repeat": repeat,
                   "results": rows}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json-jax")
    ap.add_argument("--json-numpy")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--skip-numpy", action="store_true")
    args = ap.parse_args()
    if args.repeat <= 0:
        sys.exit("--repeat expects a positive integer")
    # A row (or a group of rows, by the prefix of their names) that --only selects.
    wanted = lambda name: name.startswith(args.only) or args.only.startswith(name)
    print(f"peers (cpu: {cpu_flags()}, {os.cpu_count()} cpus), median of {args.repeat}")
    rows, device = jax_rows(args.repeat, wanted)
    if args.json_jax:
        write(args.json_jax, "jax", device, args.repeat, rows)
    if not args.skip_numpy:
        rows, device = numpy_rows(args.repeat, wanted)
        if args.json_numpy:
            write(args.json_numpy, "numpy", device, args.repeat, rows)


if __name__ == "__main__":
    main()
