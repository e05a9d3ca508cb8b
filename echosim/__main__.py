from echosim.cli import main

raise SystemExit(main())
