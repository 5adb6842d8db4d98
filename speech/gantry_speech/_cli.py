"""Shared CLI plumbing: one JSON object on stdout, a stable exit code on failure.

The TypeScript side parses stdout as JSON and switches on the exit code, so every exit path
(including argparse's usage errors) must print JSON, and nothing else may go to stdout.
"""
import argparse
import json
import sys

EXIT_ERROR = 1  # unexpected failure (missing model, crash)
EXIT_BAD_REQUEST = 2  # bad arguments or unsupported request (language, task, input format)


def emit(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def fail(code, message, **extra):
    """Print {"error": message, ...} and exit with `code`. Never returns."""
    emit({"error": message, **extra})
    sys.exit(code)


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as JSON with exit code 2 instead of plain text."""

    def error(self, message):
        self.print_usage(sys.stderr)
        fail(EXIT_BAD_REQUEST, message)


def run(main):
    """Run `main()`; turn an uncaught exception into JSON + exit 1 (traceback on stderr)."""
    try:
        main()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - the contract is JSON on stdout, details on stderr
        import traceback

        traceback.print_exc(file=sys.stderr)
        fail(EXIT_ERROR, f"{type(e).__name__}: {e}")
