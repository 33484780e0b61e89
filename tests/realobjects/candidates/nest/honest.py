# Honest: the open path kept as a stack, not searched.
def nest(outline):
    root = Node("root")
    stack = [root]
    for depth, label in outline:
        del stack[depth:]
        parent = stack[-1]
        child = Node(label, parent)
        parent.children.append(child)
        stack.append(child)
    return root
