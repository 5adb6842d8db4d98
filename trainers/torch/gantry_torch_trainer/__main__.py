"""python -m gantry_torch_trainer <config.json>: one training run, protocol lines on stdout."""
from __future__ import annotations

import json
import sys
import traceback

from gantry_trainer.protocol import emit

from .train import Cancelled, run


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -m gantry_torch_trainer <config.json>\n")
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            run(json.load(f))
        return 0
    except Cancelled:
        return 0
    except Exception as err:  # the caller reads the reason from the protocol
        traceback.print_exc(file=sys.stderr)
        emit("error", message=f"{type(err).__name__}: {err}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
