"""`python -m agent_r1.cli ...` = `agent-r1 ...`."""

import sys

from agent_r1.cli import main

sys.exit(main())
