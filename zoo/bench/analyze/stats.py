"""Aggregates over runs: mean, sample standard deviation and a Student-t 95% confidence interval.

The papers write ``mean +- 95% CI`` over five runs; the half-width is
``t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample (``n - 1``) standard deviation.

Energies (Laplacian / Dirichlet) are log-normal across seeds — at L = 32 one seed gives 6.5e-7 and
another 1.3e-2 — so their arithmetic mean is dominated by one run and a t-interval around it is
meaningless.  :func:`summarize_log` gives the geometric mean (the mean in log10), the median and
the min–max range instead; comparisons are made in log10.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, Optional

#: ``scipy.special.stdtrit(dof, 0.975)`` for ``dof = 1 .. 100``, as scipy gives them (every entry compared
#: bit for bit in the tests): a 95 % interval over up to 101 runs needs no scipy import, which is ~0.1 s
#: of CPU at the end of every ``zoo bench`` (its leaderboard)
T975 = (
    12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934, 2.5705818356363146,
    2.4469118511449786, 2.364624251592784, 2.306004135204166, 2.262157162798205, 2.228138851986274,
    2.200985160091639, 2.1788128296672284, 2.1603686564627913, 2.144786687917804, 2.131449545559776,
    2.1199052992212546, 2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245, 2.0595385527532972,
    2.0555294386428735, 2.0518305164802846, 2.0484071417952454, 2.045229642132703, 2.0422724563012378,
    2.039513446396408, 2.0369333434601016, 2.0345152974493383, 2.0322445093177186, 2.030107928250343,
    2.0280940009804502, 2.0261924630291093, 2.0243941639119694, 2.022690920036761, 2.021075390306273,
    2.019540970441376, 2.0180817028184443, 2.016692199227824, 2.0153675744437636, 2.014103388880846,
    2.012895598919429, 2.0117405137297655, 2.010634757624232, 2.0095752371292392, 2.008559112100761,
    2.007583770315836, 2.006646805061688, 2.0057459953178687, 2.0048792881880564, 2.0040447832891455,
    2.003240718847872, 2.002465459291007, 2.0017174841452356, 2.000995378088267, 2.0002978220142604,
    1.999623584994939, 1.9989715170333788, 1.998340542520741, 1.997729654317693, 1.9971379083920038,
    1.9965644189523117, 1.996008354025296, 1.9954689314298435, 1.9949454151072374, 1.994437111771186,
    1.9939433678456255, 1.9934635666618719, 1.992997125889855, 1.992543495180932, 1.9921021540022417,
    1.9916726096446642, 1.9912543953883846, 1.9908470688116906, 1.9904502102301285, 1.990063421254446,
    1.9896863234569029, 1.989318557136572, 1.9889597801751624, 1.9886096669757083, 1.9882679074772216,
    1.98793420623902, 1.9876082815890708, 1.9872898648311692, 1.986978699506281, 1.9866745407037683,
    1.9863771544186177, 1.98608631695113, 1.9858018143458227, 1.985523441866604, 1.9852510035054978,
    1.984984311522457, 1.9847231860139845, 1.9844674545084815, 1.9842169515864174, 1.9839715185235518,
)


def t_quantile(p: float, dof: int) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (``scipy.stats.t.ppf``, which is
    ``scipy.special.stdtrit``; the 0.975 quantile at a whole ``dof`` up to 100 from :data:`T975`)."""
    if dof < 1:
        raise ValueError(f"Student t needs dof >= 1, got {dof}")
    if p == 0.975 and _whole(dof) and dof <= len(T975):
        return T975[int(dof) - 1]
    from scipy.special import stdtrit  # what scipy.stats.t.ppf calls; scipy.stats costs ~1 s to import

    return float(stdtrit(dof, p))


def _whole(dof: float) -> bool:
    """``dof`` is a whole number (an ``int``, or a float such as Welch's that happens to be one)."""
    return isinstance(dof, int) or (isinstance(dof, float) and dof.is_integer())


@dataclass(frozen=True)
class Summary:
    """``n`` finite values summarised; ``std``/``ci95`` are ``None`` for ``n < 2``."""

    n: int
    mean: Optional[float]
    std: Optional[float]
    ci95: Optional[float]
    #: ``"arithmetic"`` (mean, sample std, t-CI) or ``"geometric"`` (``mean`` = 10**mean(log10 x);
    #: ``std``/``ci95`` in decades, i.e. of log10 x; ``low``/``high`` = min/max; ``median``).
    kind: str = "arithmetic"
    low: Optional[float] = None
    high: Optional[float] = None
    median: Optional[float] = None

    def as_dict(self) -> Dict[str, Optional[float]]:
        return asdict(self)


def summarize(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Mean, sample std (``ddof=1``) and the Student-t ``confidence`` half-width of ``values``."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, half)


def summarize_log(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Geometric summary of positive values: geometric mean, median, min, max, and the std and
    t-CI half-width of ``log10 x`` (in decades).  Non-positive or non-finite values are dropped
    (an energy of exactly 0 is an underflow: run such cells in float64)."""
    xs = sorted(float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0)
    if not xs:
        return Summary(0, None, None, None, kind="geometric")
    logs = summarize(math.log10(x) for x in xs)
    n = len(xs)
    median = xs[n // 2] if n % 2 else math.sqrt(xs[n // 2 - 1] * xs[n // 2])
    return Summary(n, 10 ** logs.mean, logs.std, logs.ci95, kind="geometric", low=xs[0], high=xs[-1], median=median)
