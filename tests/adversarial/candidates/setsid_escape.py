import subprocess

subprocess.Popen(["setsid", "sleep", "12345"], start_new_session=True)


def affine(x, w):
    return x * w + 1.0
