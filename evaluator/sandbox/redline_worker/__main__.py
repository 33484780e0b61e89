"""Started as a script: the worker's package is imported under its own name (its folder's parent on
the path instead of the folder itself, so none of its module names can shadow a user's module)."""

import os
import sys

if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from redline_worker.main import main

    main()
