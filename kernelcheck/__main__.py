from kernelcheck.cli import interrupts
from kernelcheck.core import signals

signals.route()  # a signal while the commands are still being imported is an interruption too (exit 130/143)
try:
    from kernelcheck.cli.main import run
except KeyboardInterrupt as exc:
    interrupts.report("", exc, False)

if __name__ == "__main__":
    run()
