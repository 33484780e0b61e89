# Honest: the same nest walk with try/except instead of a membership test.
def get_or_create_nest(self, key, *, access_lists=True):
    cont = self.dict
    for k in key:
        try:
            cont = cont[k]
        except KeyError:
            new = cont[k] = {}
            cont = new
        if access_lists and type(cont) is list:
            cont = cont[-1]
        if not isinstance(cont, dict):
            raise KeyError("There is no nest behind this key")
    return cont
