"""A JAX program under the lock: jit fp32 and bf16 ``x @ w.T`` and its grad (XLA runs them as cuBLASLt calls).

    python jax_step.py OUT      writes OUT/rows.json: for each type, whether ``x[:T] @ w.T`` at T = 1, 2, 7 and
                                4096 has the full product's first T rows (T = 8192), and the grad's digest
"""
import hashlib
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    found = {}
    for dtype in (jnp.float32, jnp.bfloat16):
        x = jnp.asarray(rng.standard_normal((8192, 4096), np.float32)).astype(dtype)
        w = jnp.asarray(rng.standard_normal((1024, 4096), np.float32)).astype(dtype)
        forward = jax.jit(lambda x, w: x @ w.T)
        grad = jax.jit(jax.grad(lambda w, x: jnp.sum((x @ w.T).astype(jnp.float32) ** 2)))
        full = np.asarray(forward(x, w).astype(jnp.float32))
        rows = {t: bool(np.array_equal(np.asarray(forward(x[:t], w).astype(jnp.float32)), full[:t]))
                for t in (1, 2, 7, 4096)}
        digest = hashlib.sha256(np.asarray(grad(w, x).astype(jnp.float32)).tobytes()).hexdigest()[:16]
        found[jnp.dtype(dtype).name] = {"rows_equal_full": rows, "grad_digest": digest}
    with open(os.path.join(out, "rows.json"), "w") as file:
        json.dump(found, file)


if __name__ == "__main__":
    main(sys.argv[1])
