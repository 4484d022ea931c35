"""Hockney α-β(-γ) model: a message of n bytes costs α + n·β (Hockney 1994).

Prices an algorithm by its own closed form (``Algorithm.cost``), with
γ s/byte for local reductions (Thakur, Rabenseifner & Gropp 2005).  With
ranks per node (``ppn``) and an intranode link: hierarchical algorithms
price their intranode stages with the intranode α, β and their internode
stages with the internode ones; flat algorithms use the internode α, β
throughout, since in each of their steps some transfer crosses nodes (exact
for rings on node-major ranks, pessimistic for the early rounds of
recursive doubling, whose partners are still inside a node).
"""

from __future__ import annotations

from simcomm.cost_models.base import COST_MODELS, CostModel, LinkParams


class Hockney(CostModel):
    name = "hockney"
    summary = "α-β-γ closed forms: α + n·β per message, γ per reduced byte"
    reference = "Hockney, Parallel Computing 20(3) 1994; Thakur, Rabenseifner & Gropp, IJHPCA 2005"

    def price(self, alg, p, nbytes, link, *, gamma=0.0, ppn=1, intra=None):
        self._validate(gamma, ppn)
        e = LinkParams.of(link)
        if alg.hierarchical:
            i = LinkParams.of(intra) if intra is not None else e
            return alg.cost(p, nbytes, i.alpha, i.beta, gamma, ppn=ppn, alpha_inter=e.alpha, beta_inter=e.beta)
        return alg.cost(p, nbytes, e.alpha, e.beta, gamma, ppn=ppn)


HOCKNEY = Hockney()
COST_MODELS.add(HOCKNEY.name, HOCKNEY, summary=HOCKNEY.summary, reference=HOCKNEY.reference)
