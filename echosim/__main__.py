"""python -m echosim: the command line (`echosim.cli.main`)."""

try:
    from echosim.cli import main
except KeyboardInterrupt:  # Ctrl-C while NumPy and Numba are still importing
    import sys

    print("echosim: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
