"""Gantry's reference trainer: a small real transformer trained on CPU with JAX.

It speaks the trainer line protocol (see protocol.py): one JSON object per line
on stdout for every step, evaluation, checkpoint and the end of the run.
"""
