"""The papers the suites reproduce: the slug a suite's ``paper`` names -> a citation a reader knows.

Suites name papers by slug (``paper = "are-gats-out-of-balance"``, the file names in
``shared/papers``); pages shown to people print the title instead (:func:`cite`).
"""
from __future__ import annotations

import re
from typing import Dict

PAPERS: Dict[str, str] = {
    "are-gats-out-of-balance": "Are GATs Out of Balance? (Mustafa, Bojchevski, Burkholz; NeurIPS 2023)",
    "exploring-graph-attention-networks": "Exploring Graph Attention Networks (Aleksiev, Barrett, Falck, Mihov)",
    "lipschitz-normalization-self-attention": ("Lipschitz Normalization for Self-Attention Layers with Application "
                                               "to Graph Neural Networks (Dasoulas, Scaman, Virmaux; ICML 2021)"),
    "nonlocal-message-passing-oversmoothing": ("Solving Oversmoothing in GNNs via Nonlocal Message Passing: "
                                               "Algebraic Smoothing and Depth Scalability (Guan, He et al.)"),
    "a-critical-look-at-heterophily": "A critical look at the evaluation of GNNs under heterophily",
    "gate-intrusive-neighbors": "GATE: How to Keep Out Intrusive Neighbors (Mustafa, Burkholz; ICML 2024)",
    "dynamic-rescaling-gnns": "Training GNNs in Balance by Dynamic Rescaling (Mustafa, Burkholz; NeurIPS 2024)",
    "attention-masks-layernorm": ("On the Role of Attention Masks and LayerNorm in Transformers (Wu, Ajorlou, Wang, "
                                  "Jegelka, Jadbabaie; NeurIPS 2024)"),
    "field-2024": ("The field since 2024: Classic GNNs are Strong Baselines (Luo, Shi, Wu; NeurIPS 2024 D&B); Fixed "
                   "Aggregation Features Can Rival GNNs (Rubio-Madrigal, Burkholz; ICML 2026); Residual Connections "
                   "and Normalization Can Provably Prevent Oversmoothing in GNNs (Scholkemper, Wu, Jadbabaie, Schaub; "
                   "ICLR 2025); Graph Neural Networks Do Not Always Oversmooth (Epping, René, Helias, Schaub; NeurIPS "
                   "2024); Reducing Oversmoothing through Informed Weight Initialization in GNNs (Kelesis, Fotakis, "
                   "Paliouras; Applied Intelligence 2025); Exploring and Improving Initialization for Deep GNNs: A "
                   "Signal Propagation Perspective (Wang, Chen, Zhang, Sun, Ding; TMLR 2025)"),
}

_SLUG = re.compile("|".join(sorted(map(re.escape, PAPERS), key=len, reverse=True)))


def cite(text: str) -> str:
    """``text`` with every known paper slug replaced by its title (other text kept as written)."""
    return _SLUG.sub(lambda m: PAPERS[m.group(0)], text)


__all__ = ["PAPERS", "cite"]
