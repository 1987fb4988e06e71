"""``python -m reactchat.cli``: the reactchat command."""

from reactchat.cli.main import main

raise SystemExit(main())
