"""pytest's view of the book's pages (``make test`` executes each one with nbval): the extending page is left to
``tests/test_plugins.py``, which executes it as the book build does and checks its two tables, so it runs once."""
collect_ignore = ["extending.ipynb"]
