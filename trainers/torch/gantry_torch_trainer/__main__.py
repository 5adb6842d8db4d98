"""python -m gantry_torch_trainer <config.json>: one training run, protocol lines on stdout."""
import sys

from gantry_trainer.cli import main

from .train import run

if __name__ == "__main__":
    sys.exit(main(run, "gantry_torch_trainer"))
