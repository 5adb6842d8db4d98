"""What both trainers keep between steps: the run's counters and the early-stopping rule."""
from __future__ import annotations

from dataclasses import dataclass, field


class Cancelled(Exception):
    """SIGTERM arrived: the run stopped after its current step."""


@dataclass
class RunState:
    """What a checkpoint must carry for a resumed run to continue exactly."""

    step: int = 0
    epochs_done: int = 0
    evals_done: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    eval_history: list = field(default_factory=list)

    def record_eval(self, eval_loss: float, es: dict) -> tuple[bool, bool]:
        """Records an evaluation; returns (a new best, stop now).

        The spec's early stopping: an improvement is a drop of more than
        min_delta below the best; after warmup_evals, patience evaluations in
        a row without one stop the run (only when early stopping is enabled).
        """
        self.evals_done += 1
        self.eval_history.append([self.step, eval_loss])
        improved = self.best_metric is None or eval_loss < self.best_metric - float(es.get("min_delta", 0.0))
        warmed_up = self.evals_done > int(es.get("warmup_evals", 0))
        if improved:
            self.best_metric, self.best_step = eval_loss, self.step
            self.evals_without_improvement = 0
        elif warmed_up:
            self.evals_without_improvement += 1
        stop = bool(es.get("enabled")) and warmed_up and self.evals_without_improvement >= int(es.get("patience", 1))
        return improved, stop
