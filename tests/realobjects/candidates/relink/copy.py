def relink(head):
    """Reverse a linked list in place; returns the new head."""
    prev = None
    node = head
    while node is not None:
        nxt = node.next
        node.next = prev
        prev = node
        node = nxt
    return prev
