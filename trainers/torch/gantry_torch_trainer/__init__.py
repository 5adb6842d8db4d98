"""Gantry's PyTorch trainer: real model families (Llama, Qwen) with transformers + peft on GPU hosts.

It reads the same configuration and tokenized rows as the reference trainer
and speaks the same line protocol (gantry_trainer.protocol), so the GPU worker
runs either one the same way. Shared pieces (row batching, schedules,
protocol) are imported from the reference trainer's package, which holds no
JAX at those modules' level.
"""
