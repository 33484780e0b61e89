"""The command line's exit codes (docs/cli.md): what every command returns."""

EXIT_OK = 0  # done (for optimise: finished, with a winner or not)
EXIT_USAGE = 2  # bad arguments, target, inputs or trace; or a target redline cannot compare (`unsupported`)
EXIT_INFRA = 3  # no proposer, or infrastructure that failed (py-spy, an unreachable Ray cluster)
EXIT_CANCELLED = 130  # Ctrl-C
