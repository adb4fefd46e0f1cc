"""Print the CLI battery's cases per command and kind of bad input (tests/battery/test_grid.py), with the kinds a
command cannot meet and why. Usage: python tools/battery_report.py"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.battery import test_grid as grid  # noqa: E402

counts = grid.counts()
width = max(map(len, grid.COMMANDS))
print(f"{'command':<{width}}  " + "  ".join(f"{k[:11]:>11}" for k in grid.KINDS) + "  total")
for cmd in grid.COMMANDS:
    cells = [str(counts[cmd][k]) if counts[cmd][k] else ("n/a" if (cmd, k) in grid.NOT_APPLICABLE else "-")
             for k in grid.KINDS]
    print(f"{cmd:<{width}}  " + "  ".join(f"{c:>11}" for c in cells) + f"  {sum(counts[cmd].values()):>5}")
print(f"{len(grid.CASES)} cases; {len(grid.NOT_APPLICABLE)} (command, kind) pairs not applicable, each with its reason")
