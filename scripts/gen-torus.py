#!/usr/bin/env python3
"""Writes a topology file (the format of atmlab_control::topology) for a ROWS x COLS
torus of switches with PORTS ports each: ports 0-3 are trunks to the north, east, south
and west neighbours (wrapping around), ports 4..PORTS-1 each carry one host.

    python3 scripts/gen-torus.py 8 16 32 > topologies/torus-128x32.toml

Paper 000 §IV-A sizes its caches for "128 nodes in the network, with 32 ports per
node"; it gives no shape, so the torus (every node alike, short paths) is ours."""
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rows, cols, ports = (int(a) for a in sys.argv[1:])
    if rows < 3 or cols < 3 or ports < 5:
        sys.exit("a torus needs at least 3 x 3 switches of 5 ports (4 trunks and a host)")
    name = lambda r, c: f"s{r * cols + c}"
    out = [
        f"# A {rows} x {cols} torus of {ports}-port switches, one host on each of ports 4..{ports - 1}:",
        f"# written by `python3 scripts/gen-torus.py {rows} {cols} {ports}`.",
        f'name = "torus-{rows}x{cols}x{ports}"',
        "",
        "[defaults]",
        'link_rate = "155.52 Mb/s"',
        "buffer_cells = 1024",
        "vci = [32, 4095]",
        "",
    ]
    for r in range(rows):
        for c in range(cols):
            out += ["[[switch]]", f'name = "{name(r, c)}"', f"ports = {ports}", ""]
    for r in range(rows):
        for c in range(cols):
            # East (port 1) to the next column's west (port 3); south (port 2) to the
            # next row's north (port 0).
            out += ["[[link]]", f'a = "{name(r, c)}:1"', f'b = "{name(r, (c + 1) % cols)}:3"', ""]
            out += ["[[link]]", f'a = "{name(r, c)}:2"', f'b = "{name((r + 1) % rows, c)}:0"', ""]
    for r in range(rows):
        for c in range(cols):
            for p in range(4, ports):
                out += ["[[host]]", f'name = "h{r * cols + c}-{p}"', f'at = "{name(r, c)}:{p}"', ""]
    sys.stdout.write("\n".join(out))


main()
