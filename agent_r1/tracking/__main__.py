from agent_r1.tracking.run import main

raise SystemExit(main())
