"""Graph algorithms on dict-of-dicts graphs with networkx: shortest paths, components, betweenness."""
import random
import sys

import networkx as nx

rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 12):
    g = nx.gnm_random_graph(300, 900, seed=i)
    for u, v in g.edges:
        g.edges[u, v]["weight"] = rng.randint(1, 20)
    dist = nx.single_source_dijkstra_path_length(g, 0)
    comps = nx.number_connected_components(g)
    rank = nx.betweenness_centrality(g, k=40, seed=i)
    print(i, len(dist), comps, round(max(rank.values()), 4))
