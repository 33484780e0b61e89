def parse(lines):
    while True:  # never returns: the run is cancelled while this candidate is evaluated
        pass
