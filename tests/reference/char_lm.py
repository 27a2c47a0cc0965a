"""The external oracle for the Llama-style example model (examples/llama/model.cpp): JAX runs the
same model from the same initial weights on the same batches and trains it 20 steps with AdamW
(PyTorch's formula, float32); char_lm_reference_test runs lazycl and compares the losses and
the first step's gradients.

Usage: char_lm.py OUT. Writes a text file:

    config VOCAB DIM LAYERS HEADS KV_HEADS FFN SEQ BATCH ROPE_THETA NORM_EPS
    adamw LR BETA1 BETA2 EPS WEIGHT_DECAY
    param NAME RANK DIMS... VALUES...      (initial weights, in the model's parameter order)
    batch STEP IDS... TARGETS...           (BATCH x SEQ each, row-major)
    loss STEP VALUE                        (before the optimizer step of STEP)
    grad NAME RANK DIMS... VALUES...       (gradients of step 0's loss)

Floats use 9 significant digits, which round-trips float32 exactly.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

VOCAB, DIM, LAYERS, HEADS, KV_HEADS, FFN, SEQ, BATCH = 48, 32, 2, 4, 2, 64, 16, 4
THETA, EPS_NORM = 10000.0, 1e-5
LR, B1, B2, EPS, WD = 1e-2, 0.9, 0.999, 1e-8, 0.1
STEPS = 20
HD = DIM // HEADS

NAMES = ["tok_embeddings.weight", "layers.attention_norm.weight", "layers.attention.wq.weight",
         "layers.attention.wk.weight", "layers.attention.wv.weight", "layers.attention.wo.weight",
         "layers.ffn_norm.weight", "layers.feed_forward.w1.weight",
         "layers.feed_forward.w3.weight", "layers.feed_forward.w2.weight", "norm.weight",
         "output.weight"]
SHAPES = [(VOCAB, DIM), (LAYERS, DIM), (LAYERS, DIM, HEADS * HD), (LAYERS, DIM, KV_HEADS * HD),
          (LAYERS, DIM, KV_HEADS * HD), (LAYERS, HEADS * HD, DIM), (LAYERS, DIM),
          (LAYERS, DIM, FFN), (LAYERS, DIM, FFN), (LAYERS, FFN, DIM), (DIM,), (DIM, VOCAB)]


def rms_norm(x, w):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS_NORM) * w


def rope_tables(t):
    half = HD // 2
    step = np.float32(-2.0 * np.log(THETA) / HD)
    inv_freq = jnp.exp(jnp.arange(half, dtype=jnp.float32) * step)
    angles = jnp.arange(t, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    return jnp.cos(angles), jnp.sin(angles)


def apply_rope(x, cos, sin):
    half = HD // 2
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def split_heads(x, n):
    b, t, _ = x.shape
    return x.reshape(b, t, n, HD).transpose(0, 2, 1, 3)


def attention(q, k, v):
    t = q.shape[2]
    rep = HEADS // KV_HEADS
    k = jnp.repeat(k, rep, axis=1)
    v = jnp.repeat(v, rep, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * np.float32(1.0 / np.sqrt(HD))
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def layer(h, w, cos, sin):
    attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2 = w
    b, t, _ = h.shape
    x = rms_norm(h, attn_norm)
    q = apply_rope(split_heads(x @ wq, HEADS), cos, sin)
    k = apply_rope(split_heads(x @ wk, KV_HEADS), cos, sin)
    v = split_heads(x @ wv, KV_HEADS)
    a = attention(q, k, v).transpose(0, 2, 1, 3).reshape(b, t, HEADS * HD)
    h = h + a @ wo
    y = rms_norm(h, ffn_norm)
    return h + (jax.nn.silu(y @ w1) * (y @ w3)) @ w2


def loss_fn(params, ids, targets):
    cos, sin = rope_tables(ids.shape[1])
    h = params[0][ids]

    def body(h, w):
        return layer(h, w, cos, sin), None

    h, _ = jax.lax.scan(body, h, tuple(params[1:10]))
    logits = rms_norm(h, params[10]) @ params[11]
    logp = jax.nn.log_softmax(logits.reshape(-1, VOCAB), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=1))


def floats(a):
    return " ".join("%.9g" % v for v in np.asarray(a, dtype=np.float32).reshape(-1))


def tensor_text(a):
    a = np.asarray(a)
    return " ".join([str(a.ndim)] + [str(d) for d in a.shape]) + " " + floats(a)


def main():
    rng = np.random.default_rng(20261123)
    params = []
    for name, shape in zip(NAMES, SHAPES):
        if "norm" in name:
            params.append((1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32))
        else:
            params.append((0.02 * rng.standard_normal(shape)).astype(np.float32))
    # A learnable "text": each token follows from the one before by a fixed rule (step 1, 2
    # or 3 by position), so the loss falls well below log(VOCAB) within the 20 steps.
    text = np.zeros(4096, dtype=np.int64)
    for i in range(1, len(text)):
        text[i] = (text[i - 1] + 1 + i % 3) % VOCAB
    batches = []
    for _ in range(STEPS):
        starts = rng.integers(0, len(text) - SEQ - 1, size=BATCH)
        batches.append(np.stack([text[s:s + SEQ + 1] for s in starts]).astype(np.int32))
    lines = ["config %d %d %d %d %d %d %d %d %r %r" % (VOCAB, DIM, LAYERS, HEADS, KV_HEADS, FFN,
                                                       SEQ, BATCH, THETA, EPS_NORM),
             "adamw %r %r %r %r %r" % (LR, B1, B2, EPS, WD)]
    for name, p in zip(NAMES, params):
        lines.append("param %s %s" % (name, tensor_text(p)))
    for step, b in enumerate(batches):
        ids, targets = b[:, :-1], b[:, 1:]
        lines.append("batch %d %s %s" % (step, " ".join(map(str, ids.reshape(-1))),
                                         " ".join(map(str, targets.reshape(-1)))))

    value_and_grad = jax.jit(jax.value_and_grad(loss_fn))
    p = [jnp.asarray(a) for a in params]
    m = [jnp.zeros_like(a) for a in p]
    v = [jnp.zeros_like(a) for a in p]
    for step, b in enumerate(batches):
        loss, g = value_and_grad(p, jnp.asarray(b[:, :-1]), jnp.asarray(b[:, 1:]))
        lines.append("loss %d %.9g" % (step, float(loss)))
        if step == 0:
            for name, gi in zip(NAMES, g):
                lines.append("grad %s %s" % (name, tensor_text(gi)))
        t = step + 1
        c1 = np.float32(1.0 - B1 ** t)
        c2 = np.float32(1.0 - B2 ** t)
        for i in range(len(p)):
            p[i] = p[i] * np.float32(1.0 - LR * WD)
            m[i] = np.float32(B1) * m[i] + np.float32(1.0 - B1) * g[i]
            v[i] = np.float32(B2) * v[i] + np.float32(1.0 - B2) * g[i] * g[i]
            p[i] = p[i] - np.float32(LR) * (m[i] / c1) / (jnp.sqrt(v[i] / c2) + np.float32(EPS))
    with open(sys.argv[1], "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
