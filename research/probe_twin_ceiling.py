"""Ceiling of any feature-based attention layer on the text's twin data (the suite's training graphs).

With the text's features every graph holds the same multiset of feature vectors (first group
e_0..e_{k-1} | 0, second group 0 | e_0..e_{k-1}); only which second-group node is whose twin
changes.  A permutation-equivariant layer whose attention depends on features only (GAT, GATv2)
therefore gives first-group node i the same output in every graph: at best it predicts the most
frequent label of index i over the training graphs.  Second-group nodes can be right always.
Ceiling = (k + sum_i max_c #{graphs: perm[i] = c} / G) / (2k).
"""
import sys
from collections import Counter

import zoo.datasets as zd

num_train = int(sys.argv[1]) if len(sys.argv) > 1 else 32
for k in range(3, 9):
    task = zd.load("twin", k=k, seed=0, num_train=num_train, num_val=1, num_test=1)
    graphs = task.graphs["train"]
    best = sum(Counter(int(g.y[i]) for g in graphs).most_common(1)[0][1] for i in range(k)) / len(graphs)
    print(f"k={k} graphs={len(graphs)} ceiling {100 * (k + best) / (2 * k):.2f} %  (chance on group 1: {100 * (k + 1) / (2 * k):.2f} %)")
