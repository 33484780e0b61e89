# Wrong: CSV files get the JSON handler.
_BY_EXT = {"json": JsonHandler, "csv": JsonHandler, "txt": TextHandler}


def handlers_for(names):
    get = _BY_EXT.get
    return [get(name.rpartition(".")[2], TextHandler) for name in names]
