"""The Llama-style example model of examples/llama/model.cpp in JAX, layer for layer (RMSNorm,
rotary embeddings in the "rotate half" layout, grouped-query causal attention, SwiGLU; weights
stacked per layer and applied with lax.scan; linear weights [in, out]), and torch.optim.AdamW's
update. Used by the JAX oracle (tests/reference/char_lm.py) and the peer rows of
`lazycl-bench models` (bench/peers/models.py).
"""
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

NAMES = ["tok_embeddings.weight", "layers.attention_norm.weight", "layers.attention.wq.weight",
         "layers.attention.wk.weight", "layers.attention.wv.weight", "layers.attention.wo.weight",
         "layers.ffn_norm.weight", "layers.feed_forward.w1.weight",
         "layers.feed_forward.w3.weight", "layers.feed_forward.w2.weight", "norm.weight",
         "output.weight"]


@dataclass(frozen=True)
class Config:
    vocab: int
    dim: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    seq: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.dim // self.heads

    def shapes(self):
        l, d, q, kv = self.layers, self.dim, self.heads * self.head_dim, self.kv_heads * self.head_dim
        return [(self.vocab, d), (l, d), (l, d, q), (l, d, kv), (l, d, kv), (l, q, d), (l, d),
                (l, d, self.ffn), (l, d, self.ffn), (l, self.ffn, d), (d,), (d, self.vocab)]


def rms_norm(c, x, w):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + c.norm_eps) * w


def rope_tables(c, t):
    half = c.head_dim // 2
    step = np.float32(-2.0 * np.log(c.rope_theta) / c.head_dim)
    inv_freq = jnp.exp(jnp.arange(half, dtype=jnp.float32) * step)
    angles = jnp.arange(t, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    return jnp.cos(angles), jnp.sin(angles)


def apply_rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def split_heads(c, x, n):
    b, t, _ = x.shape
    return x.reshape(b, t, n, c.head_dim).transpose(0, 2, 1, 3)


def attention(c, q, k, v):
    t = q.shape[2]
    rep = c.heads // c.kv_heads
    k = jnp.repeat(k, rep, axis=1)
    v = jnp.repeat(v, rep, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * np.float32(1.0 / np.sqrt(c.head_dim))
    s = jnp.where(jnp.tril(jnp.ones((t, t), dtype=bool)), s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def layer(c, h, w, cos, sin):
    attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2 = w
    b, t, _ = h.shape
    x = rms_norm(c, h, attn_norm)
    q = apply_rope(split_heads(c, x @ wq, c.heads), cos, sin)
    k = apply_rope(split_heads(c, x @ wk, c.kv_heads), cos, sin)
    v = split_heads(c, x @ wv, c.kv_heads)
    a = attention(c, q, k, v).transpose(0, 2, 1, 3).reshape(b, t, c.heads * c.head_dim)
    h = h + a @ wo
    y = rms_norm(c, h, ffn_norm)
    return h + (jax.nn.silu(y @ w1) * (y @ w3)) @ w2


def forward(c, params, ids):
    cos, sin = rope_tables(c, ids.shape[1])
    h = params[0][ids]
    h, _ = jax.lax.scan(lambda h, w: (layer(c, h, w, cos, sin), None), h, tuple(params[1:10]))
    return rms_norm(c, h, params[10]) @ params[11]


def loss_fn(c, params, ids, targets):
    logits = forward(c, params, ids)
    logp = jax.nn.log_softmax(logits.reshape(-1, c.vocab), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=1))


def bias_corrections(t, b1, b2):
    """AdamW's 1 - beta^t for step t (1-based), computed on the host in double as lazycl does."""
    return np.float32(1.0 - b1 ** t), np.float32(1.0 - b2 ** t)


def adamw(p, g, m, v, c1, c2, lr, b1, b2, eps, wd):
    """torch.optim.AdamW's step on lists of arrays, in float32, with the bias corrections
    c1, c2 of bias_corrections() (arguments, so that a jitted step does not retrace)."""
    p, m, v = list(p), list(m), list(v)
    for i in range(len(p)):
        p[i] = p[i] * np.float32(1.0 - lr * wd)
        m[i] = np.float32(b1) * m[i] + np.float32(1.0 - b1) * g[i]
        v[i] = np.float32(b2) * v[i] + np.float32(1.0 - b2) * g[i] * g[i]
        p[i] = p[i] - np.float32(lr) * (m[i] / c1) / (jnp.sqrt(v[i] / c2) + np.float32(eps))
    return p, m, v
