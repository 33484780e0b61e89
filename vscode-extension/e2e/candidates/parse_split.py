def parse(lines):
    return [line.split(",") for line in lines]
