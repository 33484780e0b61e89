# Wrong: links each child to its parent's list but records the root as its parent (the children lists are right).
def nest(outline):
    root = Node("root")
    stack = [root]
    for depth, label in outline:
        del stack[depth:]
        child = Node(label, root)
        stack[-1].children.append(child)
        stack.append(child)
    return root
