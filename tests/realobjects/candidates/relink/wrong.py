# Wrong: the old head (the new tail) keeps pointing at its old successor, a cycle 10,000 links down.
def relink(head):
    nodes = []
    node = head
    while node is not None:
        nodes.append(node)
        node = node.next
    for a, b in zip(nodes[1:], nodes):
        a.next = b
    return nodes[-1] if nodes else None
