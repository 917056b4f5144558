"""The main job. Until the fleet demo lands (simulated devices, collector, Spark
report), it builds the board tree and runs the codec self-check on MicroPython."""
HELP = "run the fleet demo (for now: build the board tree and self-check the codec)"


def add_arguments(p):
    p.add_argument("--out", default="build/board", help="board tree directory (default: build/board)")


def run(args):
    from fleetwire.tools import selfcheck
    print("fleetwire demo: the fleet demo (broker, simulated devices, collector, Spark report) "
          "arrives with the fleet issues; today it builds the board tree and checks the codec.")
    return selfcheck.run(args)
