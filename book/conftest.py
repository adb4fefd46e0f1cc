"""pytest's view of the book's pages (``make test`` executes each one with nbval), less two pages other tests
already execute in full: the extending page (``tests/test_plugins.py`` runs it as the book build does and checks its
two tables) and the front page (``tests/test_read_only.py`` runs it in a fresh copy of the repository, checks its
summary and that nothing was written), so each runs once."""
collect_ignore = ["extending.ipynb", "intro.ipynb"]
