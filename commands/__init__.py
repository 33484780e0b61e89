"""The command line's subcommands that need more than a few lines, and how they render a run."""
