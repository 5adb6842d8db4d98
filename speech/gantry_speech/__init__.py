"""Gantry's speech model work in Python: decode, transcribe, diarize, synthesize test audio.

Each module is a small CLI (`python -m gantry_speech.<module>`, PYTHONPATH=speech) that the
TypeScript control plane runs as a subprocess and reads one JSON object from stdout. Python
is used only because the models (faster-whisper, the Resemblyzer speaker encoder) live here.
"""
