"""Where pods go: predicates, a node index for the greedy path, gang placement by CP-SAT, explanations."""
