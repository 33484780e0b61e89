# Wrong: answers a missing key with a new dict without putting it into self.dict.
def get_or_create_nest(self, key, *, access_lists=True):
    cont = self.dict
    for k in key:
        if k not in cont:
            return {}
        cont = cont[k]
        if access_lists and isinstance(cont, list):
            cont = cont[-1]
        if not isinstance(cont, dict):
            raise KeyError("There is no nest behind this key")
    return cont
