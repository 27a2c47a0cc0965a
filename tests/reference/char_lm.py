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

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "peers"))
import llama_jax  # noqa: E402  (the model in JAX: bench/peers/llama_jax.py)

CONFIG = llama_jax.Config(vocab=48, dim=32, layers=2, heads=4, kv_heads=2, ffn=64, seq=16)
BATCH = 4
LR, B1, B2, EPS, WD = 1e-2, 0.9, 0.999, 1e-8, 0.1
STEPS = 20


def floats(a):
    return " ".join("%.9g" % v for v in np.asarray(a, dtype=np.float32).reshape(-1))


def tensor_text(a):
    a = np.asarray(a)
    return " ".join([str(a.ndim)] + [str(d) for d in a.shape]) + " " + floats(a)


def main():
    rng = np.random.default_rng(20261123)
    params = []
    for name, shape in zip(llama_jax.NAMES, CONFIG.shapes()):
        if "norm" in name:
            params.append((1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32))
        else:
            params.append((0.02 * rng.standard_normal(shape)).astype(np.float32))
    # A learnable "text": each token follows from the one before by a fixed rule (step 1, 2
    # or 3 by position), so the loss falls well below log(VOCAB) within the 20 steps.
    text = np.zeros(4096, dtype=np.int64)
    for i in range(1, len(text)):
        text[i] = (text[i - 1] + 1 + i % 3) % CONFIG.vocab
    batches = []
    for _ in range(STEPS):
        starts = rng.integers(0, len(text) - CONFIG.seq - 1, size=BATCH)
        batches.append(np.stack([text[s:s + CONFIG.seq + 1] for s in starts]).astype(np.int32))
    c = CONFIG
    lines = ["config %d %d %d %d %d %d %d %d %r %r" % (c.vocab, c.dim, c.layers, c.heads,
                                                       c.kv_heads, c.ffn, c.seq, BATCH,
                                                       c.rope_theta, c.norm_eps),
             "adamw %r %r %r %r %r" % (LR, B1, B2, EPS, WD)]
    for name, p in zip(llama_jax.NAMES, params):
        lines.append("param %s %s" % (name, tensor_text(p)))
    for step, b in enumerate(batches):
        ids, targets = b[:, :-1], b[:, 1:]
        lines.append("batch %d %s %s" % (step, " ".join(map(str, ids.reshape(-1))),
                                         " ".join(map(str, targets.reshape(-1)))))

    value_and_grad = jax.jit(jax.value_and_grad(lambda *a: llama_jax.loss_fn(CONFIG, *a)))
    p = [jnp.asarray(a) for a in params]
    m = [jnp.zeros_like(a) for a in p]
    v = [jnp.zeros_like(a) for a in p]
    for step, b in enumerate(batches):
        loss, g = value_and_grad(p, jnp.asarray(b[:, :-1]), jnp.asarray(b[:, 1:]))
        lines.append("loss %d %.9g" % (step, float(loss)))
        if step == 0:
            for name, gi in zip(llama_jax.NAMES, g):
                lines.append("grad %s %s" % (name, tensor_text(gi)))
        c1, c2 = llama_jax.bias_corrections(step + 1, B1, B2)
        p, m, v = llama_jax.adamw(p, g, m, v, c1, c2, LR, B1, B2, EPS, WD)
    with open(sys.argv[1], "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
