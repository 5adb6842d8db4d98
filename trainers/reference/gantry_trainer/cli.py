"""The command line both trainers share: `python -m <package> <config.json>`."""
from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable

from .protocol import emit
from .run_state import Cancelled


def main(run: Callable[[dict], None], prog: str) -> int:
    if len(sys.argv) != 2:
        sys.stderr.write(f"usage: python -m {prog} <config.json>\n")
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            run(json.load(f))
        return 0
    except Cancelled:
        return 0
    except Exception as err:  # noqa: BLE001 - any failure is the run's; the caller reads the reason from the protocol
        traceback.print_exc(file=sys.stderr)
        emit("error", message=f"{type(err).__name__}: {err}")
        return 1
