"""`python -m invoicing_async` works like the `invoicing-async` command."""

from invoicing_async._cli import main

raise SystemExit(main())
