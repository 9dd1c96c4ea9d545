from agent_r1.tracking.cli import main

raise SystemExit(main())
