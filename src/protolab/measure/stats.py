"""Small statistics helpers."""

from __future__ import annotations

from scipy.stats import beta


def clopper_pearson(successes: int, trials: int, confidence: float = 0.99) -> tuple[float, float]:
    """Exact (Clopper-Pearson) two-sided interval for a binomial proportion."""
    if trials <= 0:
        raise ValueError("clopper_pearson needs at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in 0..={trials}, got {successes}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2
    lower = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    upper = 1.0 if successes == trials else float(beta.ppf(1 - tail, successes + 1, trials - successes))
    return lower, upper
