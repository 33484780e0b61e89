def nest(outline):
    """A tree from (depth, label) pairs, each entry under the nearest earlier entry one level up."""
    root = Node("root")
    placed = [(0, root)]
    for depth, label in outline:
        for d, node in reversed(placed):
            if d == depth - 1:
                parent = node
                break
        child = Node(label, parent)
        parent.children.append(child)
        placed.append((depth, child))
    return root
