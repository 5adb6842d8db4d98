"""python -m gantry_trainer <config.json>: one training run, protocol lines on stdout."""
import sys

from .cli import main
from .train import run

if __name__ == "__main__":
    sys.exit(main(run, "gantry_trainer"))
