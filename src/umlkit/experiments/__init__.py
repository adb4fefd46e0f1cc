"""umlkit.experiments: the runs behind each table, one module per paper (plus shared ones such as budgets)."""
