def handlers_for(names):
    out = []
    for name in names:
        for key, cls in HANDLERS:
            if name.endswith("." + key):
                out.append(cls)
                break
        else:
            out.append(TextHandler)
    return out
